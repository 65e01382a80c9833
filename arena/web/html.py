"""The pieces of the web page (docs/api.md, "The web page"): its style and one script, its
Content-Security-Policy, and cells that carry each exact value as JSON in `data-value`, so a
test can read back what is shown."""

from __future__ import annotations

import base64
import hashlib
import html
import json
from typing import Any

from arena.service.numbers import format_value, with_interval
from tasks.redact import redact_raw, redact_value
from tasks.workloads.base import ColumnFormat

REFRESH_S = 5  # the index reloads itself while a batch runs
CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:72em}
table{border-collapse:collapse}td,th{padding:.3em .6em;border-bottom:1px solid #ddd;
text-align:right;vertical-align:middle}td.name,th.name{text-align:left}
svg.bar{display:inline-block;width:8em;height:.8em;background:#eee;vertical-align:middle}
rect.good{fill:#2e9e44}rect.fair{fill:#e0b020}rect.poor{fill:#d0342c}.card{border:1px solid #ccc;
border-radius:6px;padding:.8em;margin:.8em 0}.card h2{margin:.2em 0}
.card.good{border-left:8px solid #2e9e44}.card.fair{border-left:8px solid #e0b020}
.card.poor{border-left:8px solid #d0342c}pre{background:#f6f6f6;padding:.5em;
overflow-x:auto;max-height:20em}.dim{display:flex;gap:.6em;align-items:center}
.dim label{width:6em}
figure.picture{margin:1em 0}figure.picture img{max-width:100%;height:auto}
figure.picture figcaption{font-size:.85em;color:#555}td.trend figure{margin:0}
td.trend img{width:15em;height:auto}figure.best-episode img{width:384px;image-rendering:pixelated}
progress.units{width:24em;height:1em;vertical-align:middle}td.reason{text-align:left}
tr.unit.waiting td{color:#999}tr.unit.error td.status{color:#d0342c;font-weight:bold}
"""
# Bound to the form here rather than in an onsubmit attribute: the page's Content-Security-Policy
# admits this one script (by its hash), and no inline event handler.
MERGE_JS = """
for (const form of document.querySelectorAll('form.merge')) {
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const out = document.getElementById('merge-answer');
    const answer = await fetch(form.dataset.url, {method: 'POST',
      headers: {'Authorization': 'Bearer ' + form.token.value}});
    const body = await answer.json();
    out.textContent = answer.status + ': ' + (body.message || JSON.stringify(body.detail));
  });
}
"""

# The batch page's live progress: GET /batches/{id} every 2 s (connect-src 'self'), shown in
# its progress bar, counts and status; the page loads again when the batch ends, or when units
# finished and it is 10 s old (its unit table and timeline are the server's).
POLL_JS = """
const live = document.getElementById('live');
if (live) {
  const loaded = Date.now();
  const finished = JSON.parse(live.dataset.finished);
  const poll = async () => {
    try {
      const answer = await fetch(live.dataset.url, {headers: {'Accept': 'application/json'}});
      if (answer.ok) {
        const batch = (await answer.json()).batch;
        const bar = document.querySelector('progress.units');
        bar.max = batch.total;
        bar.value = batch.completed;
        document.querySelector('.counts').textContent =
          batch.completed + '/' + batch.total + ' units, ' + batch.errors + ' errors';
        document.querySelector('.status').textContent = batch.status;
        const moved = batch.completed !== Number(live.dataset.completed);
        if (finished.includes(batch.status) || (moved && Date.now() - loaded > 10000)) {
          location.reload();
          return;
        }
      }
    } catch (error) {
      // the API is away for a moment: ask again
    }
    setTimeout(poll, 2000);
  };
  setTimeout(poll, 2000);
}
"""


def csp_hash(source: str) -> str:
    """A CSP source admitting exactly this inline script or style."""
    return f"'sha256-{base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()}'"


# The page loads nothing from elsewhere: its one style sheet and its two scripts are inline and
# admitted by hash (no 'unsafe-inline'); the merge button and the batch page's progress fetch
# this origin; its pictures are this origin's images (img-src); nothing frames it.
PAGE_CSP = (
    f"default-src 'none'; style-src {csp_hash(CSS)}; "
    f"script-src {csp_hash(MERGE_JS)} {csp_hash(POLL_JS)}; "
    "connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)


def e(value: Any) -> str:
    """`value` for a page: redacted before it is escaped (escaping respells a secret)."""
    return html.escape(redact_raw(str(value)), quote=True)


def data(value: Any) -> str:
    """The exact value as JSON (redacted), escaped for an attribute."""
    return html.escape(json.dumps(redact_value(value)), quote=True)


def layout(
    title: str, body: str, refresh: bool = False, script: bool = False, poll: bool = False
) -> str:
    """A page: `refresh` reloads it every REFRESH_S, `script` binds the merge button, `poll`
    follows a running batch (POLL_JS)."""
    meta = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if refresh else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{meta}'
        f"<title>{e(title)} · Arena</title><style>{CSS}</style></head><body>"
        f'<p><a href="/">Arena</a></p><h1>{e(title)}</h1>{body}'
        + (f"<script>{MERGE_JS}</script>" if script else "")
        + (f"<script>{POLL_JS}</script>" if poll else "")
        + "</body></html>"
    )


def band(value: float | None) -> str:
    """The seed's colours: green above 80, yellow from 50 to 80, red below 50."""
    if value is None:
        return "poor"
    return "good" if value > 80 else "fair" if value >= 50 else "poor"


def number(value: Any, fmt: ColumnFormat = "number", cls: str = "") -> str:
    return f'<td class="{e(cls)}" data-value="{data(value)}">{e(format_value(value, fmt))}</td>'


def interval(point: Any, ci: Any, fmt: ColumnFormat, cls: str) -> str:
    """A point with its 95% interval, as `arena leaderboard` shows it."""
    values = {"point": point, "ci95": ci}
    return (
        f'<td class="{e(cls)}" data-value="{data(values)}">{e(with_interval(point, ci, fmt))}</td>'
    )


def bar(value: Any, cls: str, label: str | None = None) -> str:
    """A 0-100 value as a small horizontal bar, coloured by band, with its number (an SVG: a
    width in a style attribute would need 'unsafe-inline' in the page's CSP)."""
    shown = value if isinstance(value, int | float) else None
    width = max(0.0, min(100.0, float(shown))) if shown is not None else 0.0
    return (
        f'<span class="{e(cls)}" data-value="{data(value)}">'
        + (f"<label>{e(label)}</label>" if label else "")
        + '<svg class="bar" viewBox="0 0 100 1" preserveAspectRatio="none">'
        f'<rect class="{band(shown)}" width="{width:.1f}" height="1"/></svg>'
        f" {e(format_value(value, 'number'))}</span>"
    )
