"""A trusted agent that ends the worker it runs in is the agent's fault (issue 34, finding 5).

Where no jail starts and the operator trusts every agent (ARENA_TRUST_AGENTS=true), an agent's
code runs in the worker's own process (tasks/workloads/untrusted.py). An agent that exits
(`os._exit`), kills its process or crashes the interpreter then takes the worker down with it,
and nothing is left to say so: the chunk is delivered again, its running unit counted once more
(tasks/execute_chunk.py keeps the count on the one unit that was running). Without more, such a
unit became an infrastructure error after ARENA_MAX_DELIVERIES deaths and the batch ended
`incomplete` with no board, as if the machine had failed. In the sandbox the worker sees the
agent's process die and the unit is the agent's error at once (AgentProcessDied).

So before a trusted agent runs in the worker's process, its unit is noted in Redis
(`batch:{id}:in_process`, tasks/workloads/untrusted.py), and a unit so noted whose worker died
under it DEATHS_BLAMED times is the agent's error, AgentProcessDied, scored as the rubric
scores any agent error: the batch ends and the good agents get their board. One death is
forgiven (a pool process killed by the machine's OOM killer or an operator while the unit ran);
the second on the same unit is its agent's doing. A unit that never ran its agent in the
worker's process (a sandboxed agent, a built-in) is not noted: its worker's deaths stay
infrastructure errors.
"""

from __future__ import annotations

from tasks.execute import UnitRun, error_result
from tasks.settings import current_settings
from tasks.store import Store
from tasks.workloads.base import Unit

# Worker deaths counted against a noted unit (tasks/execute_chunk.py's counts: a death while it
# ran alone, or the crash its group owed) before its agent is blamed: one death by chance is
# forgiven. Never more than ARENA_MAX_DELIVERIES, which gives the unit up as infrastructure.
DEATHS_BLAMED = 2


def blamed_on_agent(db: Store, unit: Unit, attempts: int) -> UnitRun | None:
    """The agent's error for a unit whose in-process agent ended its worker DEATHS_BLAMED times
    (`attempts` counts this one), or None: run it."""
    deaths = attempts - 1
    if deaths < 1 or deaths < min(DEATHS_BLAMED, current_settings().max_deliveries):
        return None
    if not db.ran_in_process(unit.batch_id, unit.id):
        return None
    reason = (
        f"AgentProcessDied: the worker process died {deaths} times while this unit's agent ran "
        "in it (a trusted agent runs in the worker where no jail starts, ARENA_TRUST_AGENTS: "
        "its exit, kill or crash ends the worker)"
    )
    return UnitRun(error_result(unit, reason, kind="agent"), "")
