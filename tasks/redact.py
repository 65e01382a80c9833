"""Secrets taken out of what Arena shows (docs/security.md, "The API").

A spec may carry a secret: a repository URL with a token in it
(`https://deploy:ghp_...@host/org/repo.git`), an HTTP agent's URL with a key; a check's output
may print one. Redis keeps them as given (the worker needs the real URL to clone); what leaves
Arena (the API's answers, the page, the CLI's output and report files) goes through
`redact_text` or `redact_bytes` first, so a reader sees `https://***@host/org/repo.git`.

What counts as a secret: the userinfo of any URL, the value of a secret-named query parameter
(`?private_token=...`), a bearer credential, and tokens whose shape their issuers publish so
that scanners can find them (GitHub, GitLab, `sk-` keys of OpenAI, Anthropic and others, Slack,
AWS access key ids, Hugging Face, npm, Google API keys). A token keeps its prefix (`ghp_***`),
which says what leaked without leaking it.

Secrets are taken out of the raw values first (`redact_value`: a structure walked, each string
redacted before anything serialises it), since escaping changes a secret's spelling: a
password with `"` or `\\` in it is `\\"` and `\\\\` in JSON, `&#34;` in HTML. A last pass runs
on the text that leaves (`redact_text`, `redact_bytes`: the API's answers, the CLI's output):
there no rule matches a bare quote (a JSON document stays valid), an escaped pair (`\\"`,
`\\u00e9`) is read as part of a URL's userinfo, and a token after an escaped newline
(`\\nghp_...`) is still a token.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"
_WORD = "A-Za-z0-9_-"


def _token(prefix: str, sep: str, body: str) -> str:
    """`prefix` + `sep` + `body`, matched from `sep`: a pattern that starts with a literal lets
    the regex engine skip ahead (one rule costs about half a millisecond per megabyte; an
    alternation of prefixes, thirty). The token starts a word, or follows an escaped newline
    or tab (`\\n` in a JSON string)."""
    start = f"{prefix}{re.escape(sep)}"
    return rf"{re.escape(sep)}(?<={start})(?:(?<![{_WORD}]{start})|(?<=\\[nrt]{start})){body}"


_QUERY_NAMES = ("access_token", "private_token", "token", "api_key", "apikey", "password", "secret")
_BEARER = r"(?<![A-Za-z0-9_]{word})( +)[A-Za-z0-9._~+/-]{{8,}}=*"
_UNDERSCORE_TOKENS = (
    _token("gh[pousr]", "_", "[A-Za-z0-9]{20,}"),  # GitHub classic
    _token("github_pat", "_", "[A-Za-z0-9_]{20,}"),  # GitHub fine-grained
    _token("hf", "_", "[A-Za-z0-9]{30,}"),  # Hugging Face
    _token("npm", "_", "[A-Za-z0-9]{36}"),  # npm
)
_DASH_TOKENS = (
    _token("glpat", "-", "[A-Za-z0-9_-]{20,}"),  # GitLab
    _token("sk", "-", "[A-Za-z0-9_-]{20,}"),  # OpenAI, Anthropic and others
    _token("xox[abposr]", "-", "[A-Za-z0-9-]{10,}"),  # Slack
)
# A rule per shape: (pattern, replacement), each pattern starting with a literal (see _token).
RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        # URL userinfo, scheme://user:password@host, up to its last @ (`&`, `;`, `#`: HTML
        # writes ' as &#x27;; a backslash and what follows: JSON's escaped pairs, \" and \\)
        (r"://(?:[^\x00-\x20\x7f/?\"\\<>]|\\[^\x00-\x20\x7f])+@", f"://{MASK}@"),
        # ?token=..., &password=... (`;`: HTML writes & as &amp;)
        (
            "=(?:" + "|".join(rf"(?<=[?&;]{n}=)" for n in _QUERY_NAMES) + r")[^&#\s\"'<>\\]+",
            f"={MASK}",
        ),
        ("earer(?<=[Bb]earer)" + _BEARER.format(word="[Bb]earer"), rf"earer\1{MASK}"),
        ("EARER(?<=BEARER)" + _BEARER.format(word="BEARER"), rf"EARER\1{MASK}"),
        ("|".join(_UNDERSCORE_TOKENS), f"_{MASK}"),
        ("|".join(_DASH_TOKENS), f"-{MASK}"),
        (_token("AKI", "A", "[0-9A-Z]{16}"), f"A{MASK}"),  # AWS access key ids
        (_token("AI", "z", "a[0-9A-Za-z_-]{35}"), f"za{MASK}"),  # Google API keys (AIza...)
    )
)


# A raw value's userinfo: everything from :// to the authority's last @ (a raw password may
# hold a quote, a backslash or an @; the authority ends at /, ?, # or a space).
RAW_USERINFO = re.compile(r"://[^\x00-\x20\x7f/?#]+@")


def redact_raw(text: str) -> str:
    """A raw value (not yet escaped for JSON or HTML), or plain text that leaves as it is (a
    CLI's table), with every secret replaced by ***."""
    return redact_text(RAW_USERINFO.sub(f"://{MASK}@", text))


def redact_value(value: Any) -> Any:
    """`value` (what JSON can hold: dicts, lists, strings, numbers) with every string in it,
    keys too, redacted as a raw value, before anything serialises it."""
    if isinstance(value, str):
        return redact_raw(value)
    if isinstance(value, dict):
        return {redact_value(k): redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value


def redact_text(text: str) -> str:
    """`text` with every secret replaced by ***; `text` itself when it holds none."""
    for pattern, replacement in RULES:
        if pattern.search(text):
            text = pattern.sub(replacement, text)
    return text


def redact_bytes(body: bytes) -> bytes:
    """A UTF-8 text (a JSON answer, a page, a log) with every secret replaced by ***."""
    text = body.decode("utf-8", "surrogateescape")
    redacted = redact_text(text)
    return body if redacted is text else redacted.encode("utf-8", "surrogateescape")
