#!/usr/bin/env bash
# make_captures.sh -- regenerate the real test-runner and linter captures in this folder.
#
# Builds small sample projects (sources are embedded below as heredocs) in a
# scratch directory, runs the real tools on them, and writes, next to this
# script (or into $1 if given):
#   <runner>_<case>.txt   raw combined stdout+stderr (`cmd > file 2>&1`)
#   junit_<case>.xml      the JUnit XML report a test command wrote (pytest --junitxml)
#   manifest.json         command, exit code and EXPECTED test counts per case
#   <linter>_<case>.txt   raw combined stdout+stderr of a lint command
#   lint_manifest.json    command, exit code and EXPECTED lint counts per lint case
#
# The expected counts are written by hand from the sample sources below (the
# independent truth); the exit codes are whatever the tools return.
#
# Tool versions used for the committed captures (Debian 12, x86_64):
#   Python 3.11.7 + pytest 9.0.3, pluggy 1.7.0 (installed by this script into a
#                                   throwaway venv: python3 -m venv; pip install
#                                   pytest==9.0.3 pluggy==1.7.0)
#   ruff 0.17.6, flake8 7.5.0       (pip, into the same throwaway venv)
#   node v20.20.2, npm 11.19.1, jest 30.5.2 (installed by this script with
#                                   npm install --no-audit --no-fund jest@30.5.2)
#   eslint 10.15.0                  (npm install --no-audit --no-fund eslint@10.15.0)
#   cargo 1.95.0 / rustc 1.95.0, clippy 0.1.95 (rustup; https://rustup.rs)
#   go 1.19.8                       (apt-get install -y golang-go)
# Needs network access to PyPI and npm for the installs (override the versions
# with PYTEST_VERSION / PLUGGY_VERSION / JEST_VERSION / RUFF_VERSION /
# FLAKE8_VERSION / ESLINT_VERSION). Cargo (test and clippy) and go run offline.
#
# Usage: bash make_captures.sh [OUTDIR]
#   scratch dir: $CAPTURE_WORK or a fresh mktemp dir under /tmp/captures
#   SECTIONS="junit lint" bash make_captures.sh   regenerates only those sections
#     (of: pytest jest cargo go junit lint names); manifest.json keeps the other sections' cases.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="$(mkdir -p "${1:-$HERE}" && cd "${1:-$HERE}" && pwd)"
mkdir -p /tmp/captures
WORK="${CAPTURE_WORK:-$(mktemp -d /tmp/captures/run.XXXXXX)}"
mkdir -p "$WORK"
PYTEST_VERSION="${PYTEST_VERSION:-9.0.3}"
PLUGGY_VERSION="${PLUGGY_VERSION:-1.7.0}"   # printed in the pytest header
JEST_VERSION="${JEST_VERSION:-30.5.2}"
RUFF_VERSION="${RUFF_VERSION:-0.17.6}"
FLAKE8_VERSION="${FLAKE8_VERSION:-7.5.0}"
ESLINT_VERSION="${ESLINT_VERSION:-10.15.0}"
SECTIONS="${SECTIONS:-pytest jest cargo go junit lint names}"
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
echo "scratch dir: $WORK"
echo "output dir:  $OUT"
echo "sections:    $SECTIONS"

# Keep the environment neutral so output is plain text without colours.
unset PYTEST_ADDOPTS PY_COLORS FORCE_COLOR NO_COLOR CARGO_TERM_COLOR GOFLAGS \
      RUSTFLAGS RUST_BACKTRACE RUST_TEST_THREADS CI
export CARGO_NET_OFFLINE=true
export GOCACHE="$WORK/gocache" GOPATH="$WORK/gopath" GOPROXY=off GO111MODULE=on
export PATH="/root/.cargo/bin:$PATH"

# ---------------------------------------------------------------- tools ----
python3 -m venv "$WORK/venv" || exit 1
if want pytest || want junit || want names; then
  "$WORK/venv/bin/pip" install -q --disable-pip-version-check "pytest==$PYTEST_VERSION" "pluggy==$PLUGGY_VERSION" || exit 1
fi
if want lint; then
  "$WORK/venv/bin/pip" install -q --disable-pip-version-check "ruff==$RUFF_VERSION" "flake8==$FLAKE8_VERSION" || exit 1
fi
export PATH="$WORK/venv/bin:$PATH"      # `python3` is now the venv's (no extra plugins)

if want jest || want names; then
  mkdir -p "$WORK/jestdeps"
  echo '{"name":"jestdeps","private":true}' > "$WORK/jestdeps/package.json"
  (cd "$WORK/jestdeps" && npm install --no-audit --no-fund --save-exact "jest@$JEST_VERSION") || exit 1
fi
if want lint; then
  mkdir -p "$WORK/eslintdeps"
  echo '{"name":"eslintdeps","private":true}' > "$WORK/eslintdeps/package.json"
  (cd "$WORK/eslintdeps" && npm install --no-audit --no-fund --save-exact "eslint@$ESLINT_VERSION") || exit 1
fi

echo "--- versions"
if want pytest || want junit; then python3 -m pytest --version; fi
if want jest || want lint; then node --version; npm --version; fi
if want jest; then node -p "'jest ' + require('$WORK/jestdeps/node_modules/jest/package.json').version"; fi
if want cargo || want lint; then cargo --version; rustc --version; fi
if want lint; then
  ruff --version; flake8 --version; cargo clippy --version
  node -p "'eslint ' + require('$WORK/eslintdeps/node_modules/eslint/package.json').version"
fi
if want go; then go version; fi

MANIFEST_JSONL="$WORK/manifest.jsonl"
LINT_JSONL="$WORK/lint_manifest.jsonl"
: > "$MANIFEST_JSONL"
: > "$LINT_JSONL"
NAMES_JSONL="$WORK/names_manifest.jsonl"
: > "$NAMES_JSONL"

record() { # FILE RUNNER COMMAND EXIT_CODE EXPECTED_JSON NOTE [EXPECTED_SUBTESTS_JSON]
  F="$1" R="$2" C="$3" RC="$4" E="$5" N="$6" S="${7:-}" python3 - >> "$MANIFEST_JSONL" <<'PY'
import json, os
rec = {"file": os.environ["F"], "runner": os.environ["R"], "command": os.environ["C"],
       "exit_code": int(os.environ["RC"]), "expected": json.loads(os.environ["E"])}
e = rec["expected"]
assert e["total"] == e["passed"] + e["failed"] + e["errors"], rec
if os.environ["S"]:
    rec["expected_subtests"] = json.loads(os.environ["S"])
rec["note"] = os.environ["N"]
print(json.dumps(rec))
PY
}

# capture FILE RUNNER DIR COMMAND EXPECTED_JSON NOTE [EXPECTED_SUBTESTS_JSON]
# (skipped unless the runner's section is among $SECTIONS)
capture() {
  local file=$1 runner=$2 dir=$3 cmd=$4 exp=$5 note=$6 sub=${7:-}
  want "$runner" || return 0
  echo "--- $file: (cd $dir && $cmd)"
  (cd "$dir" && bash -c "$cmd") > "$OUT/$file" 2>&1
  local rc=$?
  echo "    exit code $rc"
  record "$file" "$runner" "$cmd" "$rc" "$exp" "$note" "$sub"
}

# capture_report FILE RUNNER DIR COMMAND REPORT EXPECTED_JSON NOTE
# Runs COMMAND (its own output is not kept) and keeps the report file it wrote in DIR.
capture_report() {
  local file=$1 runner=$2 dir=$3 cmd=$4 report=$5 exp=$6 note=$7
  want "$runner" || return 0
  echo "--- $file: (cd $dir && $cmd), keeping $report"
  rm -f "$dir/$report"
  (cd "$dir" && bash -c "$cmd") > /dev/null 2>&1
  local rc=$?
  echo "    exit code $rc"
  cp "$dir/$report" "$OUT/$file" || exit 1
  record "$file" "$runner" "$cmd" "$rc" "$exp" "$note"
}

# capture_lint FILE LINTER DIR COMMAND EXPECTED_JSON NOTE   (the "lint" section)
capture_lint() {
  local file=$1 linter=$2 dir=$3 cmd=$4 exp=$5 note=$6
  want lint || return 0
  echo "--- $file: (cd $dir && $cmd)"
  (cd "$dir" && bash -c "$cmd") > "$OUT/$file" 2>&1
  local rc=$?
  echo "    exit code $rc"
  F="$file" L="$linter" C="$cmd" RC="$rc" E="$exp" N="$note" python3 - >> "$LINT_JSONL" <<'PY'
import json, os
rec = {"file": os.environ["F"], "linter": os.environ["L"], "command": os.environ["C"],
       "exit_code": int(os.environ["RC"]), "expected": json.loads(os.environ["E"])}
assert set(rec["expected"]) == {"errors", "warnings"}, rec
rec["note"] = os.environ["N"]
print(json.dumps(rec))
PY
}

# ============================================================== pytest =====
P="$WORK/pytest"
mkdir -p "$P/pass" "$P/mixed" "$P/collect_error" "$P/no_tests"
for d in pass mixed collect_error no_tests; do printf '[pytest]\n' > "$P/$d/pytest.ini"; done

cat > "$P/pass/test_math.py" <<'EOF'
def test_add():
    assert 1 + 1 == 2


def test_sub():
    assert 5 - 3 == 2


def test_mul():
    assert 3 * 4 == 12


def test_div():
    assert 8 / 2 == 4
EOF
cat > "$P/pass/test_strings.py" <<'EOF'
def test_upper():
    assert "abc".upper() == "ABC"


def test_strip():
    assert "  x ".strip() == "x"


def test_join():
    assert "-".join(["a", "b"]) == "a-b"
EOF

cat > "$P/mixed/test_alpha.py" <<'EOF'
import pytest


def test_add():
    assert 1 + 1 == 2


def test_sub():
    assert 3 - 1 == 2


def test_mul_wrong():
    print("computing 2 * 3")
    assert 2 * 3 == 7


@pytest.mark.skip(reason="not implemented yet")
def test_skipped():
    assert False


@pytest.mark.xfail(reason="float rounding")
def test_xfail():
    assert 0.1 + 0.2 == 0.3
EOF
cat > "$P/mixed/test_beta.py" <<'EOF'
import pytest


@pytest.fixture
def broken_resource():
    raise RuntimeError("could not open resource")


def test_uses_broken(broken_resource):
    assert broken_resource


def test_upper():
    assert "a".upper() == "A"


def test_strip():
    assert " x ".strip() == "x"


def test_split_wrong():
    assert "a,b".split(",") == ["a", "b", "c"]
EOF

cat > "$P/collect_error/test_ok.py" <<'EOF'
def test_one():
    assert True


def test_two():
    assert True
EOF
cat > "$P/collect_error/test_broken.py" <<'EOF'
def test_broken(:
    assert True
EOF

cat > "$P/no_tests/helpers.py" <<'EOF'
def helper():
    return 42
EOF

capture pytest_pass.txt pytest "$P/pass" "python3 -m pytest" \
  '{"passed": 7, "failed": 0, "skipped": 0, "errors": 0, "total": 7}' \
  "2 files: test_math.py (4 tests) + test_strings.py (3 tests), all pass."
MIXED_EXP='{"passed": 4, "failed": 2, "skipped": 1, "xfailed": 1, "errors": 1, "total": 7}'
MIXED_NOTE="test_alpha.py: 2 pass, 1 fail (with captured print), 1 skip, 1 xfail; test_beta.py: 2 pass, 1 fail, 1 error in fixture setup. skipped=1 and xfailed=1 (counted apart); pytest reports '2 failed, 4 passed, 1 skipped, 1 xfailed, 1 error'."
capture pytest_mixed.txt pytest "$P/mixed" "python3 -m pytest" "$MIXED_EXP" "$MIXED_NOTE"
capture pytest_mixed_quiet.txt pytest "$P/mixed" "python3 -m pytest -q" "$MIXED_EXP" "Same project as pytest_mixed.txt, -q. $MIXED_NOTE"
capture pytest_mixed_verbose.txt pytest "$P/mixed" "python3 -m pytest -v" "$MIXED_EXP" "Same project as pytest_mixed.txt, -v (one PASSED/FAILED/SKIPPED/XFAIL/ERROR line per test). $MIXED_NOTE"
capture pytest_collect_error.txt pytest "$P/collect_error" "python3 -m pytest" \
  '{"passed": 0, "failed": 0, "skipped": 0, "errors": 1, "total": 1}' \
  "test_broken.py has a SyntaxError; test_ok.py has 2 valid tests which are collected but NOT run because collection is interrupted. pytest reports '1 error' ('Interrupted: 1 error during collection'), exit 2."
capture pytest_no_tests.txt pytest "$P/no_tests" "python3 -m pytest" \
  '{"passed": 0, "failed": 0, "skipped": 0, "errors": 0, "total": 0}' \
  "Only a helpers.py without tests: 'no tests ran', exit code 5."

# ================================================================ jest =====
J="$WORK/jest"
mkdir -p "$J/pass" "$J/mixed" "$J/load_error"
for d in pass mixed load_error; do
  echo "{\"name\": \"arena-jest-$d\", \"private\": true, \"scripts\": {\"test\": \"jest\"}}" > "$J/$d/package.json"
  ln -s "$WORK/jestdeps/node_modules" "$J/$d/node_modules"
done

cat > "$J/pass/sum.test.js" <<'EOF'
const sum = (a, b) => a + b;

describe('sum', () => {
  test('adds positives', () => {
    expect(sum(1, 2)).toBe(3);
  });
  test('adds negatives', () => {
    expect(sum(-1, -2)).toBe(-3);
  });
  test('adds zero', () => {
    expect(sum(0, 5)).toBe(5);
  });
});
EOF
cat > "$J/pass/str.test.js" <<'EOF'
test('upper', () => {
  expect('abc'.toUpperCase()).toBe('ABC');
});
test('trim', () => {
  expect('  x '.trim()).toBe('x');
});
EOF

cat > "$J/mixed/math.test.js" <<'EOF'
describe('math', () => {
  test('add', () => {
    expect(1 + 1).toBe(2);
  });
  test('sub', () => {
    expect(3 - 1).toBe(2);
  });
  test('mul', () => {
    expect(2 * 3).toBe(6);
  });
  test('div is wrong', () => {
    expect(10 / 4).toBe(2);
  });
  test.skip('pow not ready', () => {
    expect(2 ** 10).toBe(1024);
  });
});
EOF
cat > "$J/mixed/str.test.js" <<'EOF'
test('upper', () => {
  expect('a'.toUpperCase()).toBe('A');
});
test('repeat', () => {
  expect('ab'.repeat(2)).toBe('abab');
});
test('split is wrong', () => {
  expect('a,b'.split(',')).toEqual(['a', 'b', 'c']);
});
test.skip('padStart later', () => {
  expect('1'.padStart(3, '0')).toBe('001');
});
test.todo('implement reverse');
EOF

cat > "$J/load_error/ok.test.js" <<'EOF'
test('one', () => {
  expect(true).toBe(true);
});
test('two', () => {
  expect([1, 2]).toHaveLength(2);
});
EOF
cat > "$J/load_error/broken.test.js" <<'EOF'
test('broken', () => {
  expect(1).toBe(1);
);
EOF

capture jest_pass.txt jest "$J/pass" "CI=true npx jest" \
  '{"passed": 5, "failed": 0, "skipped": 0, "errors": 0, "total": 5}' \
  "2 suites: sum.test.js (3 tests in a describe) + str.test.js (2 tests), all pass."
capture jest_mixed.txt jest "$J/mixed" "CI=true npx jest" \
  '{"passed": 5, "failed": 2, "skipped": 3, "errors": 0, "total": 7}' \
  "math.test.js: 3 pass, 1 fail, 1 test.skip; str.test.js: 2 pass, 1 fail, 1 test.skip, 1 test.todo. skipped=3 is 2 skipped + 1 todo. Suite order in the output is not fixed. The code frames contain ANSI colour escapes even with CI=true and no TTY. NB jest's own 'Tests:' total (10) INCLUDES skipped and todo; ours excludes them."
capture jest_load_error.txt jest "$J/load_error" "CI=true npx jest" \
  '{"passed": 2, "failed": 0, "skipped": 0, "errors": 1, "total": 3}' \
  "ok.test.js: 2 pass; broken.test.js has a syntax error so the suite fails to run (counted as 1 error; jest reports it under 'Test Suites: 1 failed', and its 'Tests:' line only counts the 2 passing tests). The code frame contains ANSI colour escapes."

# =============================================================== names =====
# The same mixed pytest, jest and go projects, run so that the runner names every test (pytest -rA,
# jest --json, go test -json): what a race compares by name (scoring/race_tests.py). names_manifest.json keeps,
# per file, every test's name and outcome as written by hand from the sources above.
# capture_names FILE RUNNER DIR COMMAND EXPECTED_CASES_JSON NOTE   (the "names" section)
capture_names() {
  local file=$1 runner=$2 dir=$3 cmd=$4 exp=$5 note=$6
  want names || return 0
  echo "--- $file: (cd $dir && $cmd)"
  (cd "$dir" && bash -c "$cmd") > "$OUT/$file" 2>&1
  local rc=$?
  echo "    exit code $rc"
  F="$file" R="$runner" C="$cmd" RC="$rc" E="$exp" N="$note" D="$dir" python3 - >> "$NAMES_JSONL" <<'PY'
import json, os
print(json.dumps({"file": os.environ["F"], "runner": os.environ["R"], "command": os.environ["C"],
                  "exit_code": int(os.environ["RC"]), "root": os.environ["D"],
                  "expected_cases": json.loads(os.environ["E"]), "note": os.environ["N"]}))
PY
}
capture_names pytest_mixed_ra.txt pytest "$P/mixed" "python3 -m pytest -rA" \
  '{"test_alpha.py::test_add": "passed", "test_alpha.py::test_sub": "passed", "test_alpha.py::test_mul_wrong": "failed", "test_alpha.py::test_xfail": "xfailed", "test_beta.py::test_uses_broken": "error", "test_beta.py::test_upper": "passed", "test_beta.py::test_strip": "passed", "test_beta.py::test_split_wrong": "failed"}' \
  "Same project as pytest_mixed.txt, -rA: the short summary names every test by node id, except skipped tests (SKIPPED [1] test_alpha.py:17: reason), which it names by file and line only."
capture_names jest_json_mixed.txt jest "$J/mixed" "CI=true npx jest --json" \
  '{"math.test.js › math › add": "passed", "math.test.js › math › sub": "passed", "math.test.js › math › mul": "passed", "math.test.js › math › div is wrong": "failed", "math.test.js › math › pow not ready": "skipped", "str.test.js › upper": "passed", "str.test.js › repeat": "passed", "str.test.js › split is wrong": "failed", "str.test.js › padStart later": "skipped", "str.test.js › implement reverse": "skipped"}' \
  "Same project as jest_mixed.txt, --json: one JSON line on stdout (absolute suite paths), the usual report on stderr; test.skip is 'pending', test.todo 'todo' (both skipped)."
capture_names jest_json_load_error.txt jest "$J/load_error" "CI=true npx jest --json" \
  '{"ok.test.js › one": "passed", "ok.test.js › two": "passed", "broken.test.js": "error"}' \
  "Same project as jest_load_error.txt, --json: the suite that fails to run has no assertion results, only its failureMessage (named by its file, an error)."

# A baseline and two branches of one jest project: "breaks" breaks one baseline test and adds
# two, "skips" skips two baseline tests (what a race names: tests/race/test_broken_tests.py).
for d in names_base names_breaks names_skips; do
  mkdir -p "$J/$d"
  echo "{\"name\": \"arena-jest-$d\", \"private\": true, \"scripts\": {\"test\": \"jest\"}}" > "$J/$d/package.json"
  ln -sfn "$WORK/jestdeps/node_modules" "$J/$d/node_modules"
done
cat > "$J/names_base/calc.test.js" <<'EOF'
describe('calc', () => {
  test.each([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])('doubles %i', (n) => {
    expect(n * 2).toBe(n + n);
  });
});
EOF
cat > "$J/names_breaks/calc.test.js" <<'EOF'
describe('calc', () => {
  test.each([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])('doubles %i', (n) => {
    expect(n === 7 ? n * 2 + 1 : n * 2).toBe(n + n);
  });
  test('halves', () => {
    expect(8 / 2).toBe(4);
  });
  test('negates', () => {
    expect(-3).toBe(0 - 3);
  });
});
EOF
cat > "$J/names_skips/calc.test.js" <<'EOF'
describe('calc', () => {
  test.each([1, 2, 3, 4, 5, 6, 7, 8])('doubles %i', (n) => {
    expect(n * 2).toBe(n + n);
  });
  test.skip.each([9, 10])('doubles %i', (n) => {
    expect(n * 2).toBe(n + n);
  });
});
EOF
DOUBLES='"calc.test.js › calc › doubles 1": "passed", "calc.test.js › calc › doubles 2": "passed", "calc.test.js › calc › doubles 3": "passed", "calc.test.js › calc › doubles 4": "passed", "calc.test.js › calc › doubles 5": "passed", "calc.test.js › calc › doubles 6": "passed", "calc.test.js › calc › doubles 8": "passed"'
capture_names jest_json_names_base.txt jest "$J/names_base" "CI=true npx jest --json" \
  "{$DOUBLES, \"calc.test.js › calc › doubles 7\": \"passed\", \"calc.test.js › calc › doubles 9\": \"passed\", \"calc.test.js › calc › doubles 10\": \"passed\"}" \
  "The baseline: 10 tests (test.each), all pass."
capture_names jest_json_names_breaks.txt jest "$J/names_breaks" "CI=true npx jest --json" \
  "{$DOUBLES, \"calc.test.js › calc › doubles 7\": \"failed\", \"calc.test.js › calc › doubles 9\": \"passed\", \"calc.test.js › calc › doubles 10\": \"passed\", \"calc.test.js › calc › halves\": \"passed\", \"calc.test.js › calc › negates\": \"passed\"}" \
  "Breaks 'doubles 7', adds 'halves' and 'negates': 11 pass, 1 fails (more passing tests than the baseline)."
capture_names jest_json_names_skips.txt jest "$J/names_skips" "CI=true npx jest --json" \
  "{$DOUBLES, \"calc.test.js › calc › doubles 7\": \"passed\", \"calc.test.js › calc › doubles 9\": \"skipped\", \"calc.test.js › calc › doubles 10\": \"skipped\"}" \
  "Skips 'doubles 9' and 'doubles 10' (test.skip.each): 8 pass, 2 skipped."

# =============================================================== cargo =====
R="$WORK/cargo"
write_cargo_toml() { # dir edition
  mkdir -p "$1/src" "$1/tests"
  cat > "$1/Cargo.toml" <<EOF
[package]
name = "arena_sample"
version = "0.1.0"
edition = "$2"

[dependencies]
EOF
}
write_cargo_pass_sources() { # dir
  cat > "$1/src/lib.rs" <<'EOF'
//! Sample crate for capturing `cargo test` output.

/// Adds two numbers.
///
/// ```
/// assert_eq!(arena_sample::add(2, 3), 5);
/// ```
pub fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Multiplies two numbers.
///
/// ```
/// assert_eq!(arena_sample::mul(2, 3), 6);
/// ```
pub fn mul(a: i64, b: i64) -> i64 {
    a * b
}

pub fn is_even(n: i64) -> bool {
    n % 2 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(1, 2), 3);
    }

    #[test]
    fn multiplies() {
        assert_eq!(mul(3, 4), 12);
    }

    #[test]
    fn evens() {
        assert!(is_even(4));
        assert!(!is_even(5));
    }
}
EOF
  cat > "$1/tests/integration.rs" <<'EOF'
use arena_sample::{add, mul};

#[test]
fn add_then_mul() {
    assert_eq!(mul(add(1, 1), 5), 10);
}

#[test]
fn add_is_commutative() {
    assert_eq!(add(7, 9), add(9, 7));
}
EOF
}

write_cargo_toml "$R/pass" 2021;          write_cargo_pass_sources "$R/pass"
write_cargo_toml "$R/pass_ed2024" 2024;   write_cargo_pass_sources "$R/pass_ed2024"

write_cargo_toml "$R/mixed" 2021
cat > "$R/mixed/src/lib.rs" <<'EOF'
//! Sample crate with failing tests.

/// Adds two numbers.
///
/// ```
/// assert_eq!(arena_sample::add(2, 3), 5);
/// ```
pub fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Multiplies two numbers (the doc example is wrong on purpose).
///
/// ```
/// assert_eq!(arena_sample::mul(2, 3), 7);
/// ```
pub fn mul(a: i64, b: i64) -> i64 {
    a * b
}

pub fn is_even(n: i64) -> bool {
    n % 2 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(1, 2), 3);
    }

    #[test]
    fn multiplies() {
        assert_eq!(mul(3, 4), 12);
    }

    #[test]
    fn evens() {
        assert!(is_even(4));
    }

    #[test]
    fn multiplies_wrong() {
        println!("checking 2 * 2");
        assert_eq!(mul(2, 2), 5);
    }

    #[test]
    #[ignore]
    fn slow_test() {
        assert_eq!(add(0, 0), 0);
    }
}
EOF
cat > "$R/mixed/tests/integration.rs" <<'EOF'
use arena_sample::{add, mul};

#[test]
fn add_then_mul() {
    assert_eq!(mul(add(1, 1), 5), 10);
}

#[test]
fn add_overflow_expectation_wrong() {
    assert!(add(2, 2) > 4, "expected more than 4");
}
EOF

cp -r "$R/mixed" "$R/mixed_nff"   # separate copy: both mixed captures start from a clean build

write_cargo_toml "$R/compile_error" 2021
cat > "$R/compile_error/src/lib.rs" <<'EOF'
pub fn add(a: i64, b: i64) -> i64 {
    a + "b"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(1, 2), 3);
    }
}
EOF

capture cargo_pass.txt cargo "$R/pass" "cargo test" \
  '{"passed": 7, "failed": 0, "skipped": 0, "errors": 0, "total": 7}' \
  "edition 2021. Three test targets, three 'test result:' lines: unit tests in src/lib.rs (3), tests/integration.rs (2), Doc-tests (2). Includes the 'Compiling ...' / 'Finished' / 'Running' lines that cargo prints on stderr."
capture cargo_pass_ed2024.txt cargo "$R/pass_ed2024" "cargo test" \
  '{"passed": 7, "failed": 0, "skipped": 0, "errors": 0, "total": 7}' \
  "Same sources as cargo_pass.txt but edition 2024, where doc-tests are merged into one binary (different doc-test trailer line). unit 3 + integration 2 + doc 2."
capture cargo_mixed.txt cargo "$R/mixed" "cargo test" \
  '{"passed": 3, "failed": 1, "skipped": 1, "errors": 0, "total": 4}' \
  "Default cargo test STOPS after the first failing target: only the lib unit tests run (3 pass, 1 fail with captured stdout, 1 #[ignore] -> skipped). tests/integration.rs and the doc-tests are NOT run (see cargo_mixed_no_fail_fast.txt)."
capture cargo_mixed_no_fail_fast.txt cargo "$R/mixed_nff" "cargo test --no-fail-fast" \
  '{"passed": 5, "failed": 3, "skipped": 1, "errors": 0, "total": 8}' \
  "Same project as cargo_mixed.txt with --no-fail-fast: unit 3 pass/1 fail/1 ignored; integration 1 pass/1 fail; doc-tests 1 pass/1 fail. skipped=1 is the #[ignore] test."
capture cargo_compile_error.txt cargo "$R/compile_error" "cargo test" \
  '{"passed": 0, "failed": 0, "skipped": 0, "errors": 1, "total": 1}' \
  "Type error in src/lib.rs (i64 + &str): nothing runs, exit 101. errors=1 stands for the build failure (one rustc error E0277). Because the lib and the lib-test targets are both built, cargo prints TWO 'error: could not compile ... due to 1 previous error' lines ((lib) and (lib test)) for the same single error; no 'test result:' line is printed."

# ================================================================== go =====
G="$WORK/go"
write_go_mod() { # dir
  mkdir -p "$1"
  printf 'module example.com/arenasample\n\ngo 1.19\n' > "$1/go.mod"
}
write_go_lib() { # dir
  mkdir -p "$1/calc" "$1/strutil"
  cat > "$1/calc/calc.go" <<'EOF'
package calc

func Add(a, b int) int { return a + b }

func Sub(a, b int) int { return a - b }

func Mul(a, b int) int { return a * b }
EOF
  cat > "$1/strutil/strutil.go" <<'EOF'
package strutil

import "strings"

func Reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

func Upper(s string) string { return strings.ToUpper(s) }
EOF
}
write_go_pass_tests() { # dir
  cat > "$1/calc/calc_test.go" <<'EOF'
package calc

import "testing"

func TestAdd(t *testing.T) {
	if Add(1, 2) != 3 {
		t.Fatal("add")
	}
}

func TestSub(t *testing.T) {
	if Sub(5, 3) != 2 {
		t.Fatal("sub")
	}
}

func TestMul(t *testing.T) {
	if Mul(3, 4) != 12 {
		t.Fatal("mul")
	}
}
EOF
  cat > "$1/strutil/strutil_test.go" <<'EOF'
package strutil

import "testing"

func TestReverse(t *testing.T) {
	if Reverse("abc") != "cba" {
		t.Fatal("reverse")
	}
}

func TestUpper(t *testing.T) {
	if Upper("abc") != "ABC" {
		t.Fatal("upper")
	}
}
EOF
}

write_go_mod "$G/pass"; write_go_lib "$G/pass"; write_go_pass_tests "$G/pass"

write_go_mod "$G/mixed"; write_go_lib "$G/mixed"
cat > "$G/mixed/calc/calc_test.go" <<'EOF'
package calc

import "testing"

func TestAdd(t *testing.T) {
	t.Log("adding 1 and 2")
	if Add(1, 2) != 3 {
		t.Fatal("add")
	}
}

func TestSub(t *testing.T) {
	if got := Sub(5, 3); got != 3 {
		t.Errorf("Sub(5, 3) = %d, want 3", got)
	}
}

func TestSkipped(t *testing.T) {
	t.Skip("needs network")
}

func TestTable(t *testing.T) {
	cases := []struct {
		name       string
		a, b, want int
	}{
		{"small", 1, 2, 3},
		{"large", 1000, 2000, 3000},
		{"negative", -1, -1, -3},
	}
	for _, c := range cases {
		c := c
		t.Run(c.name, func(t *testing.T) {
			if got := Add(c.a, c.b); got != c.want {
				t.Errorf("Add(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
			}
		})
	}
}
EOF
cat > "$G/mixed/strutil/strutil_test.go" <<'EOF'
package strutil

import "testing"

func TestReverse(t *testing.T) {
	if Reverse("abc") != "cba" {
		t.Fatal("reverse")
	}
}

func TestUpper(t *testing.T) {
	if Upper("abc") != "ABC" {
		t.Fatal("upper")
	}
}

func TestCases(t *testing.T) {
	t.Run("ascii", func(t *testing.T) {
		if Reverse("ab") != "ba" {
			t.Fatal("ascii")
		}
	})
	t.Run("empty", func(t *testing.T) {
		if Reverse("") != "" {
			t.Fatal("empty")
		}
	})
	t.Run("unicode", func(t *testing.T) {
		t.Skip("unicode handling pending")
	})
}
EOF

write_go_mod "$G/build_fail"; write_go_lib "$G/build_fail"; write_go_pass_tests "$G/build_fail"
cat > "$G/build_fail/calc/calc.go" <<'EOF'
package calc

func Add(a, b int) int { return a + "b" }

func Sub(a, b int) int { return a - b }

func Mul(a, b int) int { return a * b }
EOF

write_go_mod "$G/syntax_error"; write_go_lib "$G/syntax_error"; write_go_pass_tests "$G/syntax_error"
cat > "$G/syntax_error/calc/calc_test.go" <<'EOF'
package calc

import "testing"

func TestAdd(t *testing.T) {
	if Add(1, 2) != 3 {
		t.Fatal("add")
	}

func TestSub(t *testing.T) {
	if Sub(5, 3) != 2 {
		t.Fatal("sub")
	}
}
EOF

write_go_mod "$G/no_test_files"; write_go_lib "$G/no_test_files"; write_go_pass_tests "$G/no_test_files"
rm "$G/no_test_files/strutil/strutil_test.go"

GO_MIXED_EXP='{"passed": 4, "failed": 2, "skipped": 1, "errors": 0, "total": 6}'
GO_MIXED_SUB='{"passed": 8, "failed": 3, "skipped": 2, "errors": 0, "total": 11}'
GO_MIXED_NOTE="Top-level: calc: TestAdd pass (t.Log), TestSub fail, TestSkipped skip, TestTable fail (subtests small/large pass, negative fails); strutil: TestReverse, TestUpper pass, TestCases pass (subtests ascii/empty pass, unicode t.Skip). expected counts top-level tests only; expected_subtests counts parents + subtests (4+4 pass, 2+1 fail, 1+1 skip)."

capture go_pass.txt go "$G/pass" "go test ./..." \
  '{"passed": 5, "failed": 0, "skipped": 0, "errors": 0, "total": 5}' \
  "Two packages: calc (3 tests), strutil (2 tests), all pass. Non-verbose: one 'ok' line per package, no per-test lines. Fresh GOCACHE so nothing is '(cached)'."
capture go_pass_cached.txt go "$G/pass" "go test ./..." \
  '{"passed": 5, "failed": 0, "skipped": 0, "errors": 0, "total": 5}' \
  "Immediate re-run of go_pass.txt: the 'ok' lines end in '(cached)' instead of a duration."
capture go_verbose_mixed.txt go "$G/mixed" "go test -v ./..." "$GO_MIXED_EXP" "$GO_MIXED_NOTE" "$GO_MIXED_SUB"
capture go_mixed.txt go "$G/mixed" "go test ./..." "$GO_MIXED_EXP" \
  "Same project as go_verbose_mixed.txt without -v: only failures (and their subtests) are printed, passes and skips are not listed, so passed/skipped cannot be recovered from this text alone. $GO_MIXED_NOTE" "$GO_MIXED_SUB"
capture go_build_fail.txt go "$G/build_fail" "go test ./..." \
  '{"passed": 2, "failed": 0, "skipped": 0, "errors": 1, "total": 3}' \
  "calc/calc.go has a type error (int + string): package calc reports '[build failed]' (counted as 1 error, its 3 tests never run); strutil still runs and passes its 2 tests. The compiler message goes under a '# example.com/arenasample/calc [example.com/arenasample/calc.test]' header. Exit code 2 (not 1)."
capture go_syntax_error.txt go "$G/syntax_error" "go test ./..." \
  '{"passed": 2, "failed": 0, "skipped": 0, "errors": 1, "total": 3}' \
  "calc/calc_test.go has a parse error (missing closing brace): go reports the calc package as '[setup failed]' (counted as 1 error, its tests never run); strutil passes its 2 tests. Header line is '# example.com/arenasample/calc' (no [.test] suffix). Exit code 1, unlike the type-error case (2)."
capture go_no_test_files.txt go "$G/no_test_files" "go test ./..." \
  '{"passed": 3, "failed": 0, "skipped": 0, "errors": 0, "total": 3}' \
  "calc has 3 passing tests; strutil has no _test.go file and is reported as '? ... [no test files]'."

# go test -json (the "names" section, after the go projects above): one JSON event per line.
capture_names go_json_mixed.txt go "$G/mixed" "go test -json ./..." \
  '{"example.com/arenasample/calc::TestAdd": "passed", "example.com/arenasample/calc::TestSub": "failed", "example.com/arenasample/calc::TestSkipped": "skipped", "example.com/arenasample/calc::TestTable": "failed", "example.com/arenasample/calc::TestTable/small": "passed", "example.com/arenasample/calc::TestTable/large": "passed", "example.com/arenasample/calc::TestTable/negative": "failed", "example.com/arenasample/strutil::TestReverse": "passed", "example.com/arenasample/strutil::TestUpper": "passed", "example.com/arenasample/strutil::TestCases": "passed", "example.com/arenasample/strutil::TestCases/ascii": "passed", "example.com/arenasample/strutil::TestCases/empty": "passed", "example.com/arenasample/strutil::TestCases/unicode": "skipped"}' \
  "Same project as go_verbose_mixed.txt, -json: counts as there (top level: 4 passed, 2 failed, 1 skipped); names include subtests."
capture_names go_json_build_fail.txt go "$G/build_fail" "go test -json ./..." \
  '{"example.com/arenasample/calc": "error", "example.com/arenasample/strutil::TestReverse": "passed", "example.com/arenasample/strutil::TestUpper": "passed"}' \
  "Same project as go_build_fail.txt, -json: calc does not build (its tests never run: one error named by the package); strutil passes its 2 tests."

# =============================================================== junit =====
# The pytest sample projects above, with --junitxml: the report file is the capture.
capture_report junit_pytest_pass.xml junit "$P/pass" "python3 -m pytest --junitxml=report.xml" report.xml \
  '{"passed": 7, "failed": 0, "skipped": 0, "errors": 0, "total": 7}' \
  "JUnit XML written by pytest for the project of pytest_pass.txt: 7 <testcase> elements, no child element."
capture_report junit_pytest_mixed.xml junit "$P/mixed" "python3 -m pytest --junitxml=report.xml" report.xml \
  '{"passed": 4, "failed": 2, "skipped": 1, "xfailed": 1, "errors": 1, "total": 7}' \
  "JUnit XML written by pytest for the project of pytest_mixed.txt. 9 <testcase>: 4 plain (pass); test_mul_wrong and test_split_wrong have <failure>; test_uses_broken has <error> (fixture setup); test_skipped has <skipped type=pytest.skip> and test_xfail <skipped type=pytest.xfail>."
capture_report junit_pytest_collect_error.xml junit "$P/collect_error" "python3 -m pytest --junitxml=report.xml" report.xml \
  '{"passed": 0, "failed": 0, "skipped": 0, "errors": 1, "total": 1}' \
  "JUnit XML written by pytest for the project of pytest_collect_error.txt: one <testcase> with <error message=\"collection failure\"> for test_broken.py; test_ok.py's 2 tests are never run (collection interrupted), so they have no <testcase>."

# ================================================================ lint =====
# Python samples for ruff and flake8 (the same sources: they disagree on what they report).
L="$WORK/lint"
mkdir -p "$L/py_dirty" "$L/py_clean" "$L/py_syntax"
cat > "$L/py_dirty/app.py" <<'EOF'
import os
import sys


def area(r):
    l = 3.14 * r * r
    return l


def check(x):
    if x == None:
        return undefined_name
    return x
EOF
printf 'def total(items):\n    count = 0\n    return sum(items) \n\n' > "$L/py_dirty/util.py"
cat > "$L/py_clean/app.py" <<'EOF'
def area(r):
    return 3.14 * r * r


def check(x):
    if x is None:
        return 0
    return x
EOF
cat > "$L/py_syntax/app.py" <<'EOF'
def area(r):
    return 3.14 * r * r


def check(x):
    if x > 0
        return x
    return 0
EOF
cat > "$L/py_syntax/util.py" <<'EOF'
import os


def total(items):
    return sum(items)
EOF

# ruff's default rule set changes between releases: the captures select the classic one.
RUFF="ruff check --no-cache --select E4,E7,E9,F"
RUFF_DIRTY_NOTE="Rules E4, E7, E9, F selected. app.py: F401 (os unused), F401 (sys unused), E741 (ambiguous name l), E711 (== None), F821 (undefined_name); util.py: F841 (count unused). 6 findings, all counted as errors. util.py also has a trailing space and a trailing blank line, which these rules do not check (W291/W391 are not selected)."
capture_lint ruff_dirty.txt ruff "$L/py_dirty" "$RUFF --output-format=concise ." \
  '{"errors": 6, "warnings": 0}' "Concise output (path:line:col: CODE message) and the 'Found 6 errors.' summary. $RUFF_DIRTY_NOTE"
capture_lint ruff_dirty_full.txt ruff "$L/py_dirty" "$RUFF ." \
  '{"errors": 6, "warnings": 0}' "ruff's default (full) output: a 'CODE message' header, a ' --> path:line:col' line and a code frame per finding, then 'Found 6 errors.'. $RUFF_DIRTY_NOTE"
capture_lint ruff_dirty_quiet.txt ruff "$L/py_dirty" "$RUFF --quiet --output-format=concise ." \
  '{"errors": 6, "warnings": 0}' "--quiet: the 6 concise finding lines and no summary (the parser reads them when ruff is named). $RUFF_DIRTY_NOTE"
cp -r "$L/py_dirty" "$L/py_fix"
capture_lint ruff_fix.txt ruff "$L/py_fix" "$RUFF --fix --output-format=concise ." \
  '{"errors": 4, "warnings": 0}' "--fix on a copy of the py_dirty sources: the 2 F401 are fixed (safe fixes); E741, E711, F821 and F841 remain (E711's and F841's fixes are unsafe). Summary 'Found 6 errors (2 fixed, 4 remaining).': the remaining ones count."
capture_lint ruff_clean.txt ruff "$L/py_clean" "$RUFF ." \
  '{"errors": 0, "warnings": 0}' "No finding: 'All checks passed!', exit 0."
capture_lint ruff_syntax_error.txt ruff "$L/py_syntax" "$RUFF --output-format=concise ." \
  '{"errors": 2, "warnings": 0}' "app.py has one syntax error (an if without its colon), reported as one invalid-syntax finding; util.py: F401 (os unused). 'Found 2 errors.'"
capture_lint flake8_syntax_error.txt flake8 "$L/py_syntax" "flake8 ." \
  '{"errors": 2, "warnings": 0}' "Same sources as ruff_syntax_error.txt: app.py E999 SyntaxError, util.py F401."
capture_lint flake8_dirty.txt flake8 "$L/py_dirty" "flake8 ." \
  '{"errors": 6, "warnings": 2}' "Same sources as ruff_dirty.txt. flake8's defaults (pycodestyle E/W, pyflakes F): app.py F401, F401, E741, E711, F821; util.py F841 (errors), W291 (trailing whitespace) and W391 (blank line at end of file) (warnings). No summary line."
capture_lint flake8_clean.txt flake8 "$L/py_clean" "flake8 ." \
  '{"errors": 0, "warnings": 0}' "No finding: flake8 prints nothing, exit 0."

# Rust samples for cargo clippy (no dependencies: runs offline).
write_lint_crate() { # dir
  mkdir -p "$1/src"
  printf '[package]\nname = "arena_lint"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n' > "$1/Cargo.toml"
}
write_lint_crate "$L/rs_clean"
cat > "$L/rs_clean/src/lib.rs" <<'EOF'
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

pub fn has_none(x: &[i32]) -> bool {
    x.is_empty()
}
EOF
write_lint_crate "$L/rs_warnings"
cat > "$L/rs_warnings/src/lib.rs" <<'EOF'
pub fn add(a: i32, b: i32) -> i32 {
    let unused = 5;
    return a + b;
}

pub fn has_none(x: &Vec<i32>) -> bool {
    x.len() == 0
}
EOF
write_lint_crate "$L/rs_deny"
cp "$L/rs_warnings/src/lib.rs" "$L/rs_deny/src/lib.rs"
cat >> "$L/rs_deny/src/lib.rs" <<'EOF'

pub fn same(a: i32) -> bool {
    a == a
}
EOF
write_lint_crate "$L/rs_type_error"
cat > "$L/rs_type_error/src/lib.rs" <<'EOF'
pub fn add(a: i32, b: i32) -> i32 {
    a + "b"
}
EOF
cp -r "$L/rs_warnings" "$L/rs_warnings_denied"

RS_WARN="src/lib.rs: unused variable 'unused' (rustc's unused_variables), clippy::needless_return, clippy::ptr_arg (&Vec), clippy::len_zero (len() == 0): 4 warnings."
capture_lint clippy_clean.txt clippy "$L/rs_clean" "cargo clippy --offline" \
  '{"errors": 0, "warnings": 0}' "No finding: only cargo's 'Checking' and 'Finished' lines, exit 0."
capture_lint clippy_warnings.txt clippy "$L/rs_warnings" "cargo clippy --offline" \
  '{"errors": 0, "warnings": 4}' "$RS_WARN Followed by cargo's summary 'warning: \`arena_lint\` (lib) generated 4 warnings ...', which is not a finding. Exit 0."
capture_lint clippy_warnings_cached.txt clippy "$L/rs_warnings" "cargo clippy --offline" \
  '{"errors": 0, "warnings": 4}' "Immediate re-run of clippy_warnings.txt: nothing is checked again, cargo replays the 4 cached warnings."
capture_lint clippy_deny.txt clippy "$L/rs_deny" "cargo clippy --offline" \
  '{"errors": 1, "warnings": 4}' "$RS_WARN Plus 'a == a' (clippy::eq_op, deny by default: an error). cargo ends with 'error: could not compile \`arena_lint\` (lib) due to 1 previous error; 4 warnings emitted', which is not a finding. Exit 101."
cp -r "$L/rs_deny" "$L/rs_deny_color"
capture_lint clippy_deny_color.txt clippy "$L/rs_deny_color" "cargo clippy --offline --color always" \
  '{"errors": 1, "warnings": 4}' "Same source as clippy_deny.txt with --color always: ANSI escapes around every level and message."
capture_lint clippy_warnings_denied.txt clippy "$L/rs_warnings_denied" "cargo clippy --offline -- -D warnings" \
  '{"errors": 4, "warnings": 0}' "Same source as clippy_warnings.txt with -D warnings: the 4 findings are reported as errors. Exit 101."
capture_lint clippy_type_error.txt clippy "$L/rs_type_error" "cargo clippy --offline" \
  '{"errors": 1, "warnings": 0}' "src/lib.rs: i32 + &str (rustc error E0277), nothing else. The note lines pointing into the standard library and cargo's 'error: could not compile ...' are not findings. Exit 101."

# JavaScript samples for eslint (stylish, its default format; flat config).
write_eslint_project() { # dir
  mkdir -p "$1"
  ln -sfn "$WORK/eslintdeps/node_modules" "$1/node_modules"
  cat > "$1/eslint.config.js" <<'EOF'
module.exports = [
  {
    files: ["**/*.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "commonjs",
      globals: { console: "readonly", module: "writable", require: "readonly" },
    },
    rules: {
      "no-unused-vars": "warn",
      "no-undef": "error",
      eqeqeq: "error",
      "prefer-const": "warn",
      "no-console": "warn",
    },
  },
];
EOF
}
write_eslint_project "$L/js_dirty"
cat > "$L/js_dirty/app.js" <<'EOF'
function add(a, b) {
  const unused = 1;
  if (a == b) {
    console.log("same");
  }
  return a + b + missing;
}

module.exports = { add };
EOF
cat > "$L/js_dirty/util.js" <<'EOF'
let size = 5;
module.exports = size;
EOF
write_eslint_project "$L/js_warnings"
cp "$L/js_dirty/util.js" "$L/js_warnings/util.js"
write_eslint_project "$L/js_clean"
cat > "$L/js_clean/app.js" <<'EOF'
function add(a, b) {
  return a + b;
}

module.exports = { add };
EOF

capture_lint eslint_dirty.txt eslint "$L/js_dirty" "npx eslint ." \
  '{"errors": 2, "warnings": 3}' "app.js: no-unused-vars (warn), eqeqeq (error), no-console (warn), no-undef 'missing' (error); util.js: prefer-const (warn). Summary '✖ 5 problems (2 errors, 3 warnings)'. Exit 1."
capture_lint eslint_dirty_color.txt eslint "$L/js_dirty" "npx eslint --color ." \
  '{"errors": 2, "warnings": 3}' "Same project as eslint_dirty.txt with --color: ANSI escapes in every line."
capture_lint eslint_warnings.txt eslint "$L/js_warnings" "npx eslint ." \
  '{"errors": 0, "warnings": 1}' "util.js: prefer-const (warn) only: exit 0 with a '✖ 1 problem (0 errors, 1 warning)' summary."
capture_lint eslint_clean.txt eslint "$L/js_clean" "npx eslint ." \
  '{"errors": 0, "warnings": 0}' "No finding: eslint prints nothing, exit 0 (recognised only when the linter is named)."

# ============================================================ manifest =====
# A partial run (SECTIONS) replaces only its own sections' cases in manifest.json.
python3 - "$MANIFEST_JSONL" "$OUT/manifest.json" "$SECTIONS" <<'PY'
import json, os, sys
jsonl, target, sections = sys.argv[1], sys.argv[2], sys.argv[3].split()
new = [json.loads(l) for l in open(jsonl) if l.strip()]
old = json.load(open(target)) if os.path.exists(target) else []
recs = [r for r in old if r["runner"] not in sections] + new
with open(target, "w") as f:
    json.dump(recs, f, indent=2)
    f.write("\n")
print(f"wrote {len(recs)} cases ({len(new)} new) to {target}")
PY
if want lint; then
  python3 - "$LINT_JSONL" "$OUT/lint_manifest.json" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
with open(sys.argv[2], "w") as f:
    json.dump(recs, f, indent=2)
    f.write("\n")
print(f"wrote {len(recs)} lint cases to {sys.argv[2]}")
PY
fi
if want names; then
  python3 - "$NAMES_JSONL" "$OUT/names_manifest.json" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
with open(sys.argv[2], "w") as f:
    json.dump(recs, f, indent=2, ensure_ascii=False)
    f.write("\n")
print(f"wrote {len(recs)} name cases to {sys.argv[2]}")
PY
fi
