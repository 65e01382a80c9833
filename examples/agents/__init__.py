"""Agents written as users write them, run by the examples (sandboxed: docs/agents.md)."""
