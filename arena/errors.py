"""User-facing errors (kept in tasks/validation.py so every layer can raise them)."""

from tasks.validation import InputError, RunFailed, describe_validation_error

__all__ = ["InputError", "RunFailed", "describe_validation_error"]
