"""The Store's records of teams (tasks/teams.py): what each team has submitted (units per day),
and its refusals, for quotas and per-team metrics."""

from __future__ import annotations

from tasks.store_base import StoreBase


class TeamRecords(StoreBase):
    pass
