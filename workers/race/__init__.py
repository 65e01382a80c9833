"""Race checks: a coding agent's branch (or the base) checked out fresh, built, tested, linted."""
