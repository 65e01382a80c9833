"""The Store's records of teams (tasks/teams.py): what each team has submitted (units per day),
its batches in flight, and its counts of units run, submitted and refused, for quotas and
per-team metrics.

A quota is checked and counted in one WATCH transaction on the team's keys (reserve_team_units):
two submissions of one team at once cannot both pass it; the one whose EXEC finds the keys
changed reads them again. A submission holds its units as `pending` until it is settled (its
batch is then counted from its own record: total - results) or released (refused after all)."""

from __future__ import annotations

from typing import NamedTuple

import redis

from tasks.store_base import StoreBase
from tasks.teams import Team

DAY_S = 86_400
HOLD_S = 600  # a submission's pending units count this long at most (its process may die)
SETTLED = "settled"


class QuotaRefusal(NamedTuple):
    """A batch over a quota: which, the team's units (in flight, or submitted today), the
    batch's and the limit; retry_after_s where waiting helps (the next UTC day)."""

    quota: str
    team: str
    used: int
    adding: int
    limit: int
    retry_after_s: int | None

    def message(self) -> str:
        what = (
            f"has {self.used:,} units in flight"
            if self.quota == "max_units_in_flight"
            else f"has submitted {self.used:,} units today (UTC)"
        )
        return (
            f"{self.quota}: team {self.team!r} {what}; this batch adds {self.adding:,}; "
            f"the quota is {self.limit:,}"
        )


class TeamRecords(StoreBase):
    def count_team_units(self, team: str | None, state: str, units: int) -> None:
        """Add `units` to the team's count of units in `state` ("run", "submitted", "refused"):
        what the per-team metrics read. The CLI's operator (team None) is counted as "-"."""
        if units:
            self.r.hincrby(self.keys.team_counts(team or "-"), state, units)

    def team_counts(self, team: str | None) -> dict[str, int]:
        return {k: int(v) for k, v in self.r.hgetall(self.keys.team_counts(team or "-")).items()}

    def batch_team(self, batch_id: str) -> str | None:
        """The team a batch was submitted by (BatchInfo.team; None: the operator's)."""
        team: str | None = self.r.hget(self.keys.batch(batch_id), "team")
        return team or None

    def team_units_in_flight(self, team: str) -> int:
        """Units of the team's running batches without a stored result, and of its submissions
        under way (the metrics' "waiting")."""
        return self._in_flight(team, self._redis_now())[0]

    def reserve_team_units(self, team: Team, batch_id: str, units: int) -> QuotaRefusal | None:
        """Check the team's quotas for a batch adding `units` and, when it passes, count them
        (today's units, and the batch as pending in flight) in one transaction. The refusal,
        with its numbers, writes nothing."""
        flight, days = self.keys.team_flight(team.name), self.keys.team_days(team.name)
        with self.r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(flight, days)
                    now = self._redis_now()
                    in_flight, gone = self._in_flight(team.name, now)
                    today = int(now // DAY_S)
                    by_day: dict[str, str] = pipe.hgetall(days)
                    done_today = int(by_day.get(str(today), 0))
                    refusal = quota_refusal(team, units, in_flight, done_today, now)
                    if refusal is not None:
                        pipe.unwatch()
                        return refusal
                    pipe.multi()
                    if gone:
                        pipe.hdel(flight, *gone)
                    pipe.hset(flight, batch_id, f"pending:{units}:{now + HOLD_S:.0f}")
                    if units:
                        pipe.hincrby(days, str(today), units)
                    stale = [day for day in by_day if int(day) < today - 1]
                    if stale:
                        pipe.hdel(days, *stale)
                    pipe.expire(days, 2 * DAY_S)
                    pipe.execute()
                    return None
                except redis.WatchError:
                    continue  # another submission of the team counted first: read again

    def settle_team_units(self, team: str, batch_id: str, reserved: int, enqueued: int) -> None:
        """The submission went through: its batch counts from its own record from now on, and
        today's count becomes what was really enqueued."""
        with self.r.pipeline(transaction=True) as pipe:
            pipe.hset(self.keys.team_flight(team), batch_id, SETTLED)
            if enqueued != reserved:
                self._adjust_today(pipe, team, enqueued - reserved)
            pipe.execute()

    def release_team_units(self, team: str, batch_id: str, reserved: int) -> None:
        """The submission was refused after its units were counted: they are not, and a refusal
        leaves no trace of itself (the batch stays listed only if it runs for the team)."""
        flight, days = self.keys.team_flight(team), self.keys.team_days(team)
        runs = self.r.hmget(self.keys.batch(batch_id), "status", "team") == ["running", team]
        today = str(int(self._redis_now() // DAY_S))
        with self.r.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(days)
                    left = int(pipe.hget(days, today) or 0) - reserved
                    pipe.multi()
                    if runs:
                        pipe.hset(flight, batch_id, SETTLED)
                    else:
                        pipe.hdel(flight, batch_id)
                    if left > 0:
                        pipe.hset(days, today, left)
                    else:
                        pipe.hdel(days, today)  # an empty day is no count, an empty hash no key
                    pipe.execute()
                    return
                except redis.WatchError:
                    continue  # another submission of the team counted meanwhile: again

    def _adjust_today(self, pipe: redis.client.Pipeline, team: str, units: int) -> None:
        if units:
            today = int(self._redis_now() // DAY_S)
            pipe.hincrby(self.keys.team_days(team), str(today), units)

    def _redis_now(self) -> float:
        """Redis's clock: every API process counts a day (and a pending hold) on the same one."""
        seconds, micros = self.r.time()
        return float(seconds) + float(micros) / 1e6

    def _in_flight(self, team: str, now: float) -> tuple[int, list[str]]:
        """The team's units in flight, and the entries of batches no longer its (ended, or
        running for another team) or of submissions that never settled."""
        entries: dict[str, str] = self.r.hgetall(self.keys.team_flight(team))
        with self.r.pipeline(transaction=False) as pipe:
            for batch_id in entries:
                pipe.hmget(self.keys.batch(batch_id), "status", "team", "total")
                pipe.hlen(self.keys.units(batch_id))
            read = pipe.execute()
        total, gone = 0, []
        for index, (batch_id, entry) in enumerate(entries.items()):
            (status, owner, units), results = read[2 * index], read[2 * index + 1]
            pending = entry.split(":") if entry.startswith("pending:") else None
            if status == "running" and owner in (team, None):
                total += max(0, int(units or 0) - int(results))
            elif pending is not None and now < float(pending[2]):
                total += int(pending[1])
            else:
                gone.append(batch_id)
        return total, gone


def quota_refusal(
    team: Team, units: int, in_flight: int, done_today: int, now: float
) -> QuotaRefusal | None:
    """The first quota a batch of `units` would exceed; a batch adding nothing passes."""
    if units <= 0:
        return None
    limit = team.max_units_in_flight
    if limit is not None and in_flight + units > limit:
        return QuotaRefusal("max_units_in_flight", team.name, in_flight, units, limit, None)
    limit = team.max_units_per_day
    if limit is not None and done_today + units > limit:
        # Waiting for tomorrow helps only a batch the quota can hold at all.
        tomorrow = int(DAY_S - now % DAY_S) + 1 if units <= limit else None
        return QuotaRefusal("max_units_per_day", team.name, done_today, units, limit, tomorrow)
    return None
