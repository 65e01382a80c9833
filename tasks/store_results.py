"""The Store's unit results: each unit's result, log, error marks and attempts, and the claim
of the batch's reducer (tasks/keys.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from tasks.store_base import StoreBase
from tasks.workloads.base import UnitResult

# KEYS: the batch's units, its attempts; ARGV: a unit id. A stored unit's attempts stay as they
# were (a redelivered chunk counted one for its first unit every time: 25 against a limit of 3).
COUNT_ATTEMPT = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
return redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
"""


class SaveReply(NamedTuple):
    """What Store.save_unit read back in its round trip."""

    status: str | None  # the batch's status (a worker stops a cancelled batch's chunk)
    all_stored: bool  # every unit of the batch has a result: the reducer can start
    next_attempts: int  # attempts at the next unit, counting the one now starting


class UnitResults(StoreBase):
    def count_attempt(self, pipe: Any, batch_id: str, unit_id: str) -> None:
        """Queue on `pipe`: one more attempt at `unit_id`, unless it already has a result (a
        chunk delivered again skips it: nothing runs, nothing is counted). Its reply is the
        count, 0 for a stored unit. EVAL, not EVALSHA: no extra round trip to load it."""
        keys = self.keys
        pipe.eval(COUNT_ATTEMPT, 2, keys.units(batch_id), keys.attempts(batch_id), unit_id)

    def read_chunk_start(self, pipe: Any, batch_id: str, unit_ids: Sequence[str]) -> None:
        """Queue on `pipe` what a chunk reads as it starts: the batch's status, the results
        stored for its units (None where none) and an attempt at its first unit, counted now:
        it is the one to run unless the chunk was delivered before (then it has a result, and
        nothing is counted)."""
        pipe.hget(self.keys.batch(batch_id), "status")
        pipe.hmget(self.keys.units(batch_id), unit_ids)
        self.count_attempt(pipe, batch_id, unit_ids[0])

    def reset_attempts(self, batch_id: str, unit_ids: Sequence[str]) -> None:
        """A resubmission gives retried units a fresh count of attempts."""
        if unit_ids:
            self.r.hdel(self.keys.attempts(batch_id), *unit_ids)

    def attempts(self, batch_id: str) -> dict[str, int]:
        """Unit id -> attempts counted at it."""
        return {k: int(v) for k, v in self.r.hgetall(self.keys.attempts(batch_id)).items()}

    def result_unit_ids(self, batch_id: str) -> set[str]:
        """Units with any stored result, infrastructure errors included."""
        return set(self.r.hkeys(self.keys.units(batch_id)))

    def stored_unit_ids(self, batch_id: str) -> set[str]:
        """Units with a result that stands: an infrastructure error does not (a resubmission
        retries it). A worker's chunk reads its own units' results instead (tasks/units.py)."""
        with self.r.pipeline() as pipe:
            pipe.hkeys(self.keys.units(batch_id))
            pipe.smembers(self.keys.infra(batch_id))
            stored, infra = pipe.execute()
        return set(stored) - set(infra)

    def save_unit(
        self,
        batch_id: str,
        result: UnitResult,
        log: str = "",
        next_unit: str | None = None,
        also: Callable[[Any], None] | None = None,
    ) -> SaveReply:
        """Store a unit's result; in the same round trip, read the batch's status and progress
        and count an attempt of `next_unit` (the one the worker starts next), so a chunk costs
        one Redis round trip per unit (docs/performance.md). `also(pipeline)` adds commands
        that run after these (a chunk forgets itself with its last result)."""
        keys, unit_id = self.keys, result.unit_id
        # Keyed by unit id: a redelivered unit overwrites its own result, never adds one; the
        # set of failed unit ids follows the latest result, so error counts stay exact too.
        with self.r.pipeline(transaction=True) as pipe:
            pipe.hset(keys.units(batch_id), unit_id, result.model_dump_json())
            if log:
                pipe.hset(keys.logs(batch_id), unit_id, log)
            else:
                pipe.hdel(keys.logs(batch_id), unit_id)
            if result.status == "error":
                pipe.sadd(keys.errors(batch_id), unit_id)
            else:
                pipe.srem(keys.errors(batch_id), unit_id)
            if result.error_kind == "infrastructure":
                pipe.sadd(keys.infra(batch_id), unit_id)
            else:
                pipe.srem(keys.infra(batch_id), unit_id)
            pipe.hget(keys.batch(batch_id), "status")
            pipe.hlen(keys.units(batch_id))
            pipe.hget(keys.batch(batch_id), "total")
            if next_unit is not None:
                self.count_attempt(pipe, batch_id, next_unit)
            if also is not None:
                also(pipe)
            replies = pipe.execute()
        status, stored, total = replies[4:7]
        attempts = int(replies[7]) if next_unit is not None else 0
        done = total is not None and int(stored) >= int(total)
        return SaveReply(status=status, all_stored=done, next_attempts=attempts)

    def begin_unit(self, batch_id: str, unit_id: str) -> tuple[str | None, int]:
        """(the batch's status, attempts at `unit_id` counting this one): before a chunk's
        first unit; save_unit(next_unit=...) does the same for each later one."""
        with self.r.pipeline(transaction=False) as pipe:
            pipe.hget(self.keys.batch(batch_id), "status")
            self.count_attempt(pipe, batch_id, unit_id)
            status, attempts = pipe.execute()
        return status, int(attempts)

    def unit_results(self, batch_id: str) -> dict[str, UnitResult]:
        return {
            k: UnitResult.model_validate_json(v)
            for k, v in self.r.hgetall(self.keys.units(batch_id)).items()
        }

    def logs(self, batch_id: str) -> dict[str, str]:
        """Unit id -> everything the unit printed (units that printed nothing are absent)."""
        return dict(self.r.hgetall(self.keys.logs(batch_id)))

    def unit_log(self, batch_id: str, unit_id: str) -> str | None:
        """What one unit printed (None: nothing), without reading the other units' logs."""
        text: str | None = self.r.hget(self.keys.logs(batch_id), unit_id)
        return text

    def all_stored(self, batch_id: str) -> bool:
        with self.r.pipeline() as pipe:
            pipe.hlen(self.keys.units(batch_id))
            pipe.hget(self.keys.batch(batch_id), "total")
            stored, total = pipe.execute()
        return total is not None and int(stored) >= int(total)

    # -- the reducer's claim ------------------------------------------------------------------
    def claim_reducer(self, batch_id: str, ttl_s: float) -> bool:
        """One reducer at a time per batch (the last chunk, a failed chunk's callback and the
        watchdog may each start one)."""
        key = self.keys.reducer(batch_id)
        return bool(self.r.set(key, "1", nx=True, px=int(ttl_s * 1000)))

    def extend_reducer(self, batch_id: str, ttl_s: float) -> None:
        self.r.pexpire(self.keys.reducer(batch_id), int(ttl_s * 1000))

    def release_reducer(self, batch_id: str) -> None:
        self.r.delete(self.keys.reducer(batch_id))

    def reducer_held(self, batch_id: str) -> bool:
        return bool(self.r.exists(self.keys.reducer(batch_id)))
