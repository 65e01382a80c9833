"""The Store's records of teams (tasks/teams.py): what each team has submitted (units per day),
and its refusals, for quotas and per-team metrics."""

from __future__ import annotations

from tasks.store_base import StoreBase


class TeamRecords(StoreBase):
    def count_team_units(self, team: str | None, state: str, units: int) -> None:
        """Add `units` to the team's count of units in `state` ("run", "submitted", "refused"):
        what the per-team metrics read. The CLI's operator (team None) is counted as "-"."""
        if units:
            self.r.hincrby(self.keys.team_counts(team or "-"), state, units)

    def team_counts(self, team: str | None) -> dict[str, int]:
        return {k: int(v) for k, v in self.r.hgetall(self.keys.team_counts(team or "-")).items()}
