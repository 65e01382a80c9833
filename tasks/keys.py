"""Every Redis key Arena writes, built in one place (docs/architecture.md; kombu's own keys,
which Arena only reads, are in tasks/broker.py). Each name below is under the configurable
prefix (ARENA_KEY_PREFIX, default `arena:`).

Batches (tasks/store_batches.py, tasks/store_results.py):
  `batches` sorted set: batch id -> created at; `running` set: ids of running batches;
  `runs` hash: run label (--run-id, a schedule's `NAME@slot`) -> batch id;
  `batch:{id}` hash: spec, status, counts, timestamps;
  `batch:{id}:units` hash: unit id -> result JSON; `batch:{id}:logs` hash: unit id -> what it
  printed; `batch:{id}:errors` and `batch:{id}:infra` sets: unit ids whose latest result is an
  error / an infrastructure error; `batch:{id}:attempts` hash: unit id -> attempts;
  `batch:{id}:reducer` string: the reducer's claim (expires); `batch:{id}:groups` hash: chunk
  id -> the group of units it runs now, their attempts counted and results not yet stored
  (tasks/execute_chunk.py: a worker that dies leaves it for the chunk's next delivery);
  `batch:{id}:in_process` set: unit ids whose trusted agent ran in the worker's own process
  (no jail: tasks/trusted_deaths.py blames such a unit's worker deaths on its agent).
Chunks in flight (tasks/liveness.py, tasks/watchdog.py):
  `batch:{id}:plan` hash: chunk id -> its unit ids; `batch:{id}:chunks` hash: chunk id ->
  {"units", "queue", "worker"}; `batch:{id}:beats` hash: chunk id -> last heartbeat (unix s);
  `batch:{id}:stall` string: "stored results:since"; `batch:{id}:lostscan` string: one
  watchdog's claim to look for lost units; `restoring:{delivery tag}` string: one watchdog's
  claim to restore a message; `delivered` hash: delivery tag -> when a watchdog first saw the
  message unacknowledged (Redis's clock; tasks/lua/deliveries.lua); `clocks` hash: worker host
  -> JSON [its clock minus Redis's (s), when it checked (Redis's clock)] (tasks/clock.py).
Leaderboards (tasks/store_boards.py):
  `leaderboards` set of board names; `lb:{name}` sorted set: agent -> score;
  `lb:{name}:entry:{agent}` hash: the stats behind it; `lb:{name}:history:{agent}` sorted
  set: one point per evaluation; `lb:{name}:protocol` string: the protocol fingerprint it
  holds; `lb:{name}:version` string: moves whenever the board is written (Store's cache).
Schedules (tasks/schedules.py):
  `schedules` hash: name -> entry JSON; `schedule:{name}:{slot}` string: a slot's claim.
LLM agents (tasks/llm_services.py, on the Store's client):
  `llm:limits:LIMITER/...` sorted sets: the `limits` library's moving windows (requests and
  tokens per minute, one per endpoint and limit); `llm:slot:{endpoint}:{i}` strings: an
  endpoint's concurrency slots (redis-py locks, expiring after their lease);
  `llm:cache:{key}` strings: replay cache entries (JSON, 90 days from their last use);
  `batch:{id}:llm_spent` string: the batch's spend in US dollars (INCRBYFLOAT).
Sharing a pool (tasks/store_sharing.py, tasks/fair_share.py, tasks/lua/; `{queue}`: cpu, gpu):
  `pool:{queue}:batches` hash: batch id -> JSON of its share (class, team, team weight, batch
  weight, seconds per unit (EWMA), chunk size, pass, arrival); `pool:{queue}:teams:{class}`
  hash: team -> pass; `pool:{queue}:waiting:{batch}` list: JSON [chunk id, [unit dicts]] of
  its chunks not yet given to the broker; `pool:{queue}:out:{batch}` hash: chunk id -> seconds
  charged, its chunks given to the broker and not finished; `pool:{queue}:slots` sorted set:
  worker node -> when its registration lapses (Redis's clock); `pool:{queue}:slot_counts`
  hash: worker node -> its processes consuming the queue; `pool:{queue}:backlog` list: one
  entry per chunk waiting in the pool (only its length means anything: what KEDA's redis scaler
  and arena_queue_depth read, since the broker's list holds a window only).
Teams (tasks/store_teams.py, tasks/teams.py; `{team}`: a team's name, `-` for none):
  `team:{team}:counts` hash: state (run, submitted, refused) -> units; `team:{team}:flight`
  hash: batch id -> `settled`, or `pending:{units}:{until}` while its submission runs (the
  team's batches its quota of units in flight counts); `team:{team}:days` hash: UTC day
  number -> units submitted that day (expires two days after its last write).
The embedded default's host (arena/embedded/host.py): `embedded:generation` string: how many
  hosts have started on the folder; `embedded:orphans` set: ids of the batches an earlier
  host left running (the next client to resubmit one resumes it).
Other: `probe:writes` string (a second): whether Redis accepts writes (tasks/refusal.py).
"""

from __future__ import annotations


class Keys:
    """The keys under one prefix."""

    def __init__(self, prefix: str = "arena:") -> None:
        self.prefix = prefix

    # -- batches ----------------------------------------------------------------------------
    def batches(self) -> str:
        return f"{self.prefix}batches"

    def running(self) -> str:
        return f"{self.prefix}running"

    def runs(self) -> str:
        return f"{self.prefix}runs"

    def batch(self, batch_id: str) -> str:
        return f"{self.prefix}batch:{batch_id}"

    def _of_batch(self, batch_id: str, what: str) -> str:
        return f"{self.prefix}batch:{batch_id}:{what}"

    def units(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "units")

    def logs(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "logs")

    def errors(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "errors")

    def infra(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "infra")

    def attempts(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "attempts")

    def reducer(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "reducer")

    def groups(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "groups")

    def in_process(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "in_process")

    # -- chunks in flight -------------------------------------------------------------------
    def plan(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "plan")

    def chunks(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "chunks")

    def beats(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "beats")

    def stall(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "stall")

    def lostscan(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "lostscan")

    def restoring(self, tag: str) -> str:
        return f"{self.prefix}restoring:{tag}"

    def delivered(self) -> str:
        return f"{self.prefix}delivered"

    def clocks(self) -> str:
        return f"{self.prefix}clocks"

    # -- leaderboards -----------------------------------------------------------------------
    def leaderboards(self) -> str:
        return f"{self.prefix}leaderboards"

    def board(self, name: str) -> str:
        return f"{self.prefix}lb:{name}"

    def board_entry(self, name: str, agent: str) -> str:
        return f"{self.board(name)}:entry:{agent}"

    def board_history(self, name: str, agent: str) -> str:
        return f"{self.board(name)}:history:{agent}"

    def board_protocol(self, name: str) -> str:
        return f"{self.board(name)}:protocol"

    def board_version(self, name: str) -> str:
        return f"{self.board(name)}:version"

    # -- llm agents --------------------------------------------------------------------------
    def llm_limits(self) -> str:
        """The `limits` library's key_prefix (it adds `:` and the limit's key)."""
        return f"{self.prefix}llm:limits"

    def llm_slot(self, endpoint_id: str, index: int) -> str:
        return f"{self.prefix}llm:slot:{endpoint_id}:{index}"

    def llm_cache(self, key: str) -> str:
        return f"{self.prefix}llm:cache:{key}"

    def llm_spent(self, batch_id: str) -> str:
        return self._of_batch(batch_id, "llm_spent")

    # -- schedules, probes ------------------------------------------------------------------
    def schedules(self) -> str:
        return f"{self.prefix}schedules"

    def schedule_claim(self, name: str, slot: str) -> str:
        return f"{self.prefix}schedule:{name}:{slot}"

    def write_probe(self) -> str:
        return f"{self.prefix}probe:writes"

    # -- the embedded default's host (arena/embedded/host.py) -----------------------------------
    def embedded_generation(self) -> str:
        return f"{self.prefix}embedded:generation"

    def embedded_orphans(self) -> str:
        return f"{self.prefix}embedded:orphans"

    # -- sharing (tasks/store_sharing.py, tasks/fair_share.py) ----------------------------------
    def pools(self) -> str:
        """The pattern of every key of every pool (Store.forget_pools drops them all)."""
        return f"{self.prefix}pool:*"

    def pool(self, queue: str) -> str:
        """The root of a pool's keys; the release scripts (tasks/lua/) build the rest from it:
        `{pool}batches`, `{pool}teams:{class}`, `{pool}slots`, `{pool}slot_counts`,
        `{pool}waiting:{batch}`, `{pool}out:{batch}` (the methods below)."""
        return f"{self.prefix}pool:{queue}:"

    def pool_batches(self, queue: str) -> str:
        return f"{self.pool(queue)}batches"

    def pool_teams(self, queue: str, priority: str) -> str:
        return f"{self.pool(queue)}teams:{priority}"

    def pool_slots(self, queue: str) -> str:
        return f"{self.pool(queue)}slots"

    def pool_slot_counts(self, queue: str) -> str:
        return f"{self.pool(queue)}slot_counts"

    def pool_waiting(self, queue: str, batch_id: str) -> str:
        return f"{self.pool(queue)}waiting:{batch_id}"

    def pool_out(self, queue: str, batch_id: str) -> str:
        return f"{self.pool(queue)}out:{batch_id}"

    def pool_backlog(self, queue: str) -> str:
        return f"{self.pool(queue)}backlog"

    # -- teams (tasks/store_teams.py, tasks/teams.py) ------------------------------------------
    def team_counts(self, team: str) -> str:
        return f"{self.prefix}team:{team}:counts"

    def team_flight(self, team: str) -> str:
        return f"{self.prefix}team:{team}:flight"

    def team_days(self, team: str) -> str:
        return f"{self.prefix}team:{team}:days"
