"""The service layer: what every front door does (submit, wait, status, cancel, report, logs,
boards and their history, races and merges, replays, scoring files), with no click, rich or
FastAPI in it. The CLI (arena/cli/), the HTTP API and its page (arena/web/) call it and only
render what it returns (docs/architecture.md)."""
