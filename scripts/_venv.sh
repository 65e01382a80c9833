# Sourced by scripts/arena and scripts/test: create .venv once and keep it in step with pyproject.toml.
# Works on a fresh Debian/Ubuntu machine that has only python3 and pip.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
PY=${PYTHON:-python3}

runs_as_nobody() {  # uid 65534 starts this interpreter as root does: the same build and library
    local probe='import sys; print(sys.version, sys.base_prefix)' as_root
    as_root=$("$1" -c "$probe" 2>/dev/null) || return 1
    [ "$(cd / && setpriv --reuid 65534 --regid 65534 --clear-groups "$1" -c "$probe" 2>/dev/null)" = "$as_root" ]
}

readable_python() {
    # As root, a venv from an interpreter other users cannot read (pyenv's, under /root, mode
    # 0700) cannot run the security tests' workers as uid 65534 (tests/security/cluster.py):
    # use one any user can run (the system's), unless PYTHON names the interpreter.
    [ "$(id -u)" = 0 ] && [ -z "${PYTHON:-}" ] && command -v setpriv >/dev/null || return 0
    runs_as_nobody "$PY" && return 0
    local other
    for other in /usr/bin/python3 /usr/local/bin/python3; do
        if [ -x "$other" ] && "$other" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
            && runs_as_nobody "$other"; then
            echo "arena: other users cannot run $PY; making $VENV from $other" >&2
            PY=$other
            return 0
        fi
    done
    echo "arena: other users cannot run $PY: the security tests' workers will run as root" >&2
}

make_venv() {
    readable_python
    if "$PY" -m venv "$VENV" 2>/dev/null; then return 0; fi
    rm -rf "$VENV"
    # Debian/Ubuntu split venv out of python3; install it when we can, else use virtualenv from pip.
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        ver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
        (apt-get install -y -qq "python$ver-venv" || { apt-get update -qq && apt-get install -y -qq "python$ver-venv"; }) >/dev/null
        "$PY" -m venv "$VENV" && return 0
    fi
    "$PY" -m pip install --user --quiet --break-system-packages virtualenv 2>/dev/null \
        || "$PY" -m pip install --user --quiet virtualenv
    "$PY" -m virtualenv --quiet "$VENV"
}

installed_ok() {  # the stamp names this pyproject.toml and every extra asked for
    local hash=$1 extras=$2 stamp extra
    read -r stamp 2>/dev/null < "$VENV/.arena-installed" || return 1
    [ "${stamp%% *}" = "$hash" ] || return 1
    for extra in ${extras//,/ }; do
        case ",${stamp#* }," in *",$extra,"*) ;; *) return 1 ;; esac
    done
}

ensure_venv() {  # $1: the extras to install, e.g. "dev" or "dev,mario"
    local extras=$1 hash
    hash=$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)
    [ -x "$VENV/bin/python" ] || make_venv
    if ! installed_ok "$hash" "$extras"; then
        local before=""  # keep the extras installed before: another script may need them
        read -r _ before 2>/dev/null < "$VENV/.arena-installed" || true
        extras=$(echo "$before,$extras" | tr ',' '\n' | { grep -v '^$' || true; } | sort -u | paste -sd, -)
        echo "arena: installing into $VENV (extras: ${extras:-none}) ..." >&2
        "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
        "$VENV/bin/python" -m pip install --quiet -e "$ROOT${extras:+[$extras]}" >&2
        echo "$hash $extras" > "$VENV/.arena-installed"
    fi
}
