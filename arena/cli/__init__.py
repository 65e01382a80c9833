"""The `arena` command line: click commands that parse options, call the service layer
(arena/service/) and render what it returns with rich. `main` is in arena/cli/main.py."""
