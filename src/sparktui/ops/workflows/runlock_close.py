"""``runlock close NODE``: remove a node's run lock left by a workflow that died.

Allowed when the lock is stale (its owner process is gone: it holds nothing
already, the next workflow would take it over; the containers it started may
still run, which is said), or when forced (the CLI's ``--force``). The crashed workflow
that left the lock is closed with it in the journal, unless it left a plug off:
then it stays offered (`sparktui power resume`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sparktui.core.config import Config
from sparktui.ops.guards import GuardReport, Verdict
from sparktui.ops.journal import WorkflowRecord
from sparktui.ops.plan import Needs, OpsState, Plan, PlannedStep
from sparktui.ops.resume import close
from sparktui.ops.runlocks import RunLock
from sparktui.ops.workflows.power_resume import plugs_left_off
from sparktui.ops.workflows.runner import WorkflowRun


def staleness(state: OpsState, lock: RunLock) -> bool | None:
    """Is ``lock`` stale: its owner process gone (None: unknown, another host's lock)."""
    alive = state.owner_alive.get(lock.node)
    return None if alive is None else not alive


def still_running(state: OpsState, lock: RunLock) -> list[str] | None:
    """Which of the containers ``lock``'s workflow started run on its node now
    (None: the node did not answer)."""
    snap = state.snapshot.get(lock.node)
    if snap is None or not snap.online or snap.probe is None:
        return None
    running = {c.name for c in snap.probe.running_containers}
    return [c for c in lock.containers if c in running]


@dataclass(frozen=True)
class RunlockData:
    lock: RunLock
    stale: bool | None
    record: WorkflowRecord | None
    """The unfinished workflow closed with the lock (None: none, or it left a plug off)."""


@dataclass(frozen=True)
class RunlockClose:
    node: str
    force: bool = False
    kind: str = field(default="runlock-close", init=False)

    @property
    def target(self) -> str:
        return self.node

    def needs(self, config: Config) -> Needs:
        """The node's running containers tell a stale lock from a live one."""
        return Needs(nodes=(self.node,) if self.node in config.nodes else ())

    def plan(self, state: OpsState) -> Plan:
        node = self.node
        lock = state.lock(node)
        if lock is None:
            report = GuardReport((Verdict("runlock", node, False, f"{node} holds no lock"),))
            return Plan(self.kind, node, report, (), self, nodes=(node,))
        alive = state.owner_alive.get(node)
        stale = staleness(state, lock)
        held = f"{node}: {lock.describe()}"
        if stale:
            running = still_running(state, lock)
            verdict = (Verdict("runlock", node, True, f"{held} is stale (its process is gone); "
                                                      f"it started {', '.join(running)}, which "
                                                      f"still run(s) -> `sparktui stop "
                                                      f"{lock.target}` stops it", warning=True)
                       if running else
                       Verdict("runlock", node, True, f"{held} is stale (its process is gone"
                                                      + (", none of its containers runs)"
                                                         if running is not None else ")")))
        elif self.force:
            verdict = Verdict("runlock", node, True,
                              f"{held} is not known to be stale; closing it anyway (--force)",
                              warning=True)
        else:
            why = ("its owner process is alive: let it finish" if alive
                   else "its owner is on another host")
            verdict = Verdict("runlock", node, False,
                              f"{held} is not known to be stale ({why}) -> wait for it, or "
                              f"close it anyway (`sparktui runlock close {node} --force`)")
        record = next((w for w in state.unfinished if w.wf == lock.wf), None)
        steps = [PlannedStep("close lock", node, f"remove {node}'s lock file and journal it")]
        others = [lk.node for lk in state.locks if lk.wf == lock.wf and lk.node != node]
        if record is not None and (others or plugs_left_off(record, state.config)):
            why = (f"it still locks {', '.join(others)}" if others else "it left a plug off: "
                   f"complete it with `sparktui power resume {lock.wf}`")
            steps.append(PlannedStep("keep workflow", lock.wf, f"{lock.wf} stays unfinished "
                                                               f"({why})"))
            record = None
        elif record is not None:
            steps.append(PlannedStep("close workflow", lock.wf,
                                     f"end {record.workflow} {record.target} in the journal"))
        return Plan(self.kind, node, GuardReport((verdict,)), tuple(steps), self, nodes=(node,),
                    detail={"node": node, "lock": lock.to_json()},
                    data=RunlockData(lock, stale, record))

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        ctx = run.ctx
        data: RunlockData = plan.data
        lock = data.lock
        how = "stale" if data.stale else "forced"

        async def remove() -> str:
            ctx.locks.close(self.node)
            ctx.journal.append(lock.wf, "note", workflow=lock.workflow, target=lock.target,
                               message=f"runlock on {self.node} closed by the operator ({how})")
            return f"lock of {lock.describe()} closed ({how})"

        message = await run.step("close lock", self.node, plan.steps[0].action, remove,
                                 describe=lambda m: m)
        if data.record is not None:
            record = data.record

            async def end() -> str:
                close(ctx, record, f"its runlock on {self.node} was closed")
                return f"unfinished {record.workflow} {record.target} closed with its lock"

            message += "; " + await run.step("close workflow", lock.wf, plan.steps[1].action,
                                             end, describe=lambda m: m)
        run.finish(True, message)
