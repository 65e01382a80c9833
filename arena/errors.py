"""User-facing errors (kept in tasks/validation.py so every layer can raise them)."""

from tasks.validation import InputError, describe_validation_error

__all__ = ["InputError", "describe_validation_error"]
