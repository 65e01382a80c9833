"""The Store's unit results: each unit's result, log, error marks and attempts, the group of
units each running chunk has counted and not yet stored (tasks/execute_chunk.py), and the claim
of the batch's reducer (tasks/keys.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from tasks.store_base import StoreBase
from tasks.store_flight import lua
from tasks.workloads.base import UnitResult

# A chunk's start, one EVAL (atomic). KEYS: the batch, its units, attempts, groups. ARGV: the
# chunk id, the size of its first group, this write's id, the chunk's unit ids. Reads the status
# and which units are stored; settles what a dead worker left (below); counts an attempt at each
# unit of the first group (those it runs before it next writes) and records them as the chunk's
# open group: the mark {at, g: its units, d: units owing a crash, w: the write that made it}.
# A group left open by a dead worker: one of its units without a result was running when the
# worker died, the others finished and lost their results with it. One unit: it is known, its
# count stands. Several: their counts are taken back and the crash is owed (`d`) by whichever of
# them next kills its worker alone (its units then run one per group). Either way the first
# group after a crash is one unit. `at`: the batch's creation, so a resubmission (counts reset)
# ignores what an earlier run left. A write sent again (its reply lost to a Redis restart) finds
# its own `w` and changes nothing. A first group of one unit owing nothing leaves no mark: its
# count alone says what a crash needs to know (a one-unit task costs what it did before groups).
CHUNK_START = """
local status = redis.call('HGET', KEYS[1], 'status')
local stored, todo = {}, {}
for i = 4, #ARGV do
  stored[#stored + 1] = redis.call('HEXISTS', KEYS[2], ARGV[i])
  if stored[#stored] == 0 then todo[#todo + 1] = ARGV[i] end
end
if not status or status == 'cancelled' then return {status or '', stored, {}, {}} end
local at = redis.call('HGET', KEYS[1], 'created_at') or ''
local mark = redis.call('HGET', KEYS[4], ARGV[1])
mark = mark and cjson.decode(mark)
if mark and mark.w == ARGV[3] then
  local counts = {}
  for i, u in ipairs(mark.g) do counts[i] = tonumber(redis.call('HGET', KEYS[3], u) or 0) end
  return {status, stored, mark.d, counts}
end
local debt, open = {}, {}
if mark and mark.at == at then
  for _, u in ipairs(mark.g) do
    if redis.call('HEXISTS', KEYS[2], u) == 0 then open[#open + 1] = u end
  end
  if #open == 1 then
    for _, u in ipairs(mark.d) do
      if u == open[1] then redis.call('HINCRBY', KEYS[3], u, 1) end
    end
  elseif #open > 1 then
    for _, u in ipairs(open) do
      if redis.call('HINCRBY', KEYS[3], u, -1) <= 0 then redis.call('HDEL', KEYS[3], u) end
    end
    debt = open
  end
end
local size = #open > 0 and 1 or tonumber(ARGV[2])
local group, counts = {}, {}
for i = 1, math.min(size, #todo) do
  group[i] = todo[i]
  counts[i] = redis.call('HINCRBY', KEYS[3], todo[i], 1)
end
if #group > 1 or #debt > 0 then
  local new = {at = at, g = group, d = debt, w = ARGV[3]}
  redis.call('HSET', KEYS[4], ARGV[1], cjson.encode(new))
else
  redis.call('HDEL', KEYS[4], ARGV[1])
end
return {status, stored, debt, counts}
"""

# The next group, one EVAL in the MULTI that stores the last one's results. KEYS as above;
# ARGV: the chunk id, GroupChange as JSON. Counts an attempt at each unit joining the open
# group (0 for a unit with a result: a second delivery stored it), takes back those leaving it
# unrun, and records the group (none open: the mark goes).
NEXT_GROUP = """
local change = cjson.decode(ARGV[2])
local mark = redis.call('HGET', KEYS[4], ARGV[1])
if mark and cjson.decode(mark).w == change.write then
  local counts = {}
  for i, u in ipairs(change.joining) do
    counts[i] = tonumber(redis.call('HGET', KEYS[3], u) or 0)
  end
  return counts
end
for _, u in ipairs(change.leaving) do
  if redis.call('HEXISTS', KEYS[2], u) == 0 and redis.call('HINCRBY', KEYS[3], u, -1) <= 0 then
    redis.call('HDEL', KEYS[3], u)
  end
end
local counts = {}
for i, u in ipairs(change.joining) do
  counts[i] = 0
  if redis.call('HEXISTS', KEYS[2], u) == 0 then
    counts[i] = redis.call('HINCRBY', KEYS[3], u, 1)
  end
end
if #change.group > 0 then
  local at = redis.call('HGET', KEYS[1], 'created_at') or ''
  local new = {at = at, g = change.group, d = change.debt, w = change.write}
  redis.call('HSET', KEYS[4], ARGV[1], cjson.encode(new))
else
  redis.call('HDEL', KEYS[4], ARGV[1])
end
return counts
"""


class ChunkStart(NamedTuple):
    """What a chunk read as it started (Store.read_chunk_start's reply)."""

    status: str | None  # the batch's status; None: no such batch
    stored: list[bool]  # per unit of the chunk: it has a result (a later delivery skips it)
    debt: list[str]  # units of a group whose worker died: run one per group (blame, above)
    counts: list[int]  # attempts at the first group's units, counting this one

    @classmethod
    def parse(cls, reply: list[Any]) -> ChunkStart:
        status, stored, debt, counts = reply
        return cls(status or None, [bool(s) for s in stored], list(debt), list(counts))


class GroupChange(NamedTuple):
    """The chunk's next open group (tasks/execute_chunk.py), all unit ids."""

    joining: list[str]  # join the group: an attempt counted now, before they run
    leaving: list[str]  # leave it unrun: their attempts taken back
    group: list[str]  # the group from now on (empty: none open)
    debt: list[str]  # units still owing a dead worker's crash
    write: str  # this write's id, unique: sent again, it changes nothing


class SaveReply(NamedTuple):
    """What Store.save_units read back in its round trip."""

    status: str | None  # the batch's status (a worker stops a cancelled batch's chunk)
    all_stored: bool  # every unit of the batch has a result: the reducer can start
    counts: list[int]  # attempts at the units that joined the group, counting this one


class UnitResults(StoreBase):
    def read_chunk_start(
        self,
        pipe: Any,
        batch_id: str,
        chunk_id: str,
        unit_ids: Sequence[str],
        group: int,
        write: str,
    ) -> None:
        """Queue on `pipe` a chunk's start (CHUNK_START above), its first group at most `group`
        units, `write` a unique id; ChunkStart.parse its reply. EVAL, not EVALSHA: no extra
        round trip to load it."""
        keys = self._group_keys(batch_id)
        pipe.eval(CHUNK_START, len(keys), *keys, chunk_id, group, write, *unit_ids)

    def _group_keys(self, batch_id: str) -> list[str]:
        keys = self.keys
        return [
            keys.batch(batch_id),
            keys.units(batch_id),
            keys.attempts(batch_id),
            keys.groups(batch_id),
        ]

    def reset_attempts(self, batch_id: str, unit_ids: Sequence[str]) -> None:
        """A resubmission gives retried units a fresh count of attempts, and forgets that their
        agents ran in a worker's process (tasks/trusted_deaths.py): they may run sandboxed now."""
        if unit_ids:
            with self.r.pipeline(transaction=False) as pipe:
                pipe.hdel(self.keys.attempts(batch_id), *unit_ids)
                pipe.srem(self.keys.in_process(batch_id), *unit_ids)
                pipe.execute()

    def attempts(self, batch_id: str) -> dict[str, int]:
        """Unit id -> attempts counted at it."""
        return {k: int(v) for k, v in self.r.hgetall(self.keys.attempts(batch_id)).items()}

    def ran_in_process(self, batch_id: str, unit_id: str) -> bool:
        """The unit's trusted agent ran in a worker's own process (tasks/trusted_deaths.py)."""
        return bool(self.r.sismember(self.keys.in_process(batch_id), unit_id))

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

    def save_unit(self, batch_id: str, result: UnitResult, log: str = "") -> SaveReply:
        """Store one unit's result (the reducer's for a lost unit; a worker's go in groups)."""
        return self.save_units(batch_id, [(result, log)])

    def save_units(
        self,
        batch_id: str,
        runs: Sequence[tuple[UnitResult, str]],
        chunk: tuple[str, GroupChange] | None = None,
        also: Callable[[Any], None] | None = None,
    ) -> SaveReply:
        """Store units' results and what they printed in one MULTI/EXEC, one fsynced write;
        in it, `chunk` (its id, its next group: NEXT_GROUP above) and the batch's status and
        progress read back. `also(pipeline)` adds commands that run after these (a chunk
        forgets itself with its last results)."""
        keys = self.keys
        with self.r.pipeline(transaction=True) as pipe:
            queued = self._queue_results(pipe, batch_id, runs)
            closing = chunk is not None and not (chunk[1].joining or chunk[1].leaving)
            if chunk is not None and closing and not chunk[1].group:
                pipe.hdel(keys.groups(batch_id), chunk[0])  # the group closes, none opens
                queued += 1
            elif chunk is not None:
                change = json.dumps(chunk[1]._asdict())
                group_keys = self._group_keys(batch_id)
                pipe.eval(NEXT_GROUP, len(group_keys), *group_keys, chunk[0], change)
                queued += 1
            pipe.hget(keys.batch(batch_id), "status")
            pipe.hlen(keys.units(batch_id))
            pipe.hget(keys.batch(batch_id), "total")
            if also is not None:
                also(pipe)
            replies = pipe.execute()
        counts = replies[queued - 1] if chunk is not None else []
        counts = counts if isinstance(counts, list) else []
        status, stored, total = replies[queued : queued + 3]
        done = total is not None and int(stored) >= int(total)
        return SaveReply(status=status, all_stored=done, counts=counts)

    def _queue_results(
        self, pipe: Any, batch_id: str, runs: Sequence[tuple[UnitResult, str]]
    ) -> int:
        """Queue the results on `pipe` (tasks/lua/store_results.lua, one EVAL); returns how
        many commands that took. Keyed by unit id and fenced: a unit's first result stands (a
        unit that ran twice never adds or changes one; an infrastructure error gives way), and
        nothing lands once the batch was reduced; the sets of failed unit ids follow the stored
        result, so error counts stay exact too."""
        if not runs:
            return 0
        keys = self.keys
        targets = [
            keys.batch(batch_id),
            keys.units(batch_id),
            keys.logs(batch_id),
            keys.errors(batch_id),
            keys.infra(batch_id),
        ]
        values: list[str] = []
        for result, log in runs:
            flags = ("e" if result.status == "error" else "") + (
                "i" if result.error_kind == "infrastructure" else ""
            )
            values += [result.unit_id, result.model_dump_json(), log, flags]
        pipe.eval(lua("store_results"), len(targets), *targets, *values)
        return 1

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
