"""Resume: complete an unfinished power workflow from what the journal says it
did and what each plug reads now (ops/resume.py offers them; `sparktui power
resume` and the console run them). Completing means what the operator asked
for: a cycle comes back on; a power-off (of a node or a cluster) stays off,
its plug that reads on is cut, and what it never reached is said with the
command that finishes it (its guards are the command's to run again: a
shared switch another cluster now depends on, a lane started since).

The journal tells which plugs a workflow turned (or was turning) off and did
not confirm on again (`plugs_left_off`), and which nodes it told to shut down
whose plug it never began to cut (`shut_not_cut`). A resume claims nothing it
has not read: each plug is read first, the rest of the cycle's off time is
waited, the plug turned back on, the old workflow ended once every plug is
back, then each node is waited for.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sparktui.adapters.homeassistant import CONFIRM_TIMEOUT_S, SwitchState, SwitchUnavailable
from sparktui.core.config import Config
from sparktui.ops import guards
from sparktui.ops.journal import WorkflowRecord, clock_name, clock_of
from sparktui.ops.plan import Needs, OpsState, Plan, PlannedStep
from sparktui.ops.workflows.power import (
    _power,
    back_steps,
    hold_way_out,
    plug_action,
    plug_off,
    plug_on,
    wait_back,
    wait_off,
)
from sparktui.ops.workflows.runner import WorkflowRun


def plug_read_action(entity: str) -> str:
    return (f"GET /api/states/{entity}: what the plug reads, before any off time or "
            f"power-on is claimed")


def settled_after(record: WorkflowRecord, entity: str, now: float, clock: str) -> float:
    """When (on ``clock``, whose time is ``now``) a plug-off call of `record`
    that was in flight (no outcome) has certainly reached the plug: a real
    plug follows seconds after Home Assistant accepted the call (REFERENCE
    §8), so a read before then may be stale. A call journaled on another
    clock is of unknown age here: a full confirmation time from now. 0 when
    no call was in doubt."""
    doubt = [s.started_at for s in record.steps
             if s.step == "plug off" and s.target == entity and s.ok is None]
    if not doubt:
        return 0.0
    return (doubt[-1] if record.clock == clock else now) + CONFIRM_TIMEOUT_S


async def plug_read(run: WorkflowRun, entity: str, settled_at: float = 0.0) -> SwitchState:
    """A resume's first look at a plug the journal says may be off: an unreadable
    or unavailable plug ends the resume (nothing is claimed about it). A plug
    that reads on before ``settled_at`` (a plug-off call in flight may still
    land) is read again then."""
    clock = run.ctx.clock

    async def go() -> SwitchState:
        state = await _power(run.ctx).state(entity)
        if state.state == "on" and (wait := settled_at - clock.time()) > 0:
            run.progress("plug read", entity, f"{entity} reads on; its plug-off call was in "
                                              f"flight: reading again in {wait:.0f} s")
            await clock.sleep(wait)
            state = await _power(run.ctx).state(entity)
        if not state.available:
            raise SwitchUnavailable(f"{entity} is {state.state} in Home Assistant: what it "
                                    f"did is unknown -> check the plug, then resume again")
        return state

    return await run.step("plug read", entity, plug_read_action(entity), go,
                          describe=lambda st: f"{entity} reads {st.state}"
                          + ("" if st.state == "off" else ": it was not left off (no off "
                             "time is claimed)"),
                          detail=lambda st: {"state": st.state})


def off_time_left(record: WorkflowRecord, entity: str, off_seconds: float, now: float,
                  clock: str) -> float:
    """How much longer `entity`'s plug must stay off for the interrupted cycle
    `record` to have been off its full `off_seconds` (0 when it already was).
    The off time counts from the plug-off confirmation, else from its intent,
    on the record's clock: from ``now`` on another ``clock`` it cannot be
    measured, and the full off time is owed."""
    offs = [s for s in record.steps if s.step == "plug off" and s.target == entity]
    if not offs:
        return 0.0
    if record.clock != clock:
        return off_seconds
    since = offs[-1].finished_at if offs[-1].ok else offs[-1].started_at
    return max(0.0, min(off_seconds, off_seconds - (now - (since or now))))


def rest_off_step(record: WorkflowRecord, node: str, entity: str, off_seconds: float,
                  now: float, clock: str) -> list[PlannedStep]:
    """The "wait off" a resume owes before turning `entity` back on (none when the
    plug has already been off the cycle's full off time)."""
    left = off_time_left(record, entity, off_seconds, now, clock)
    if left <= 0:
        return []
    if record.clock != clock:
        return [PlannedStep("wait off", node, (
            f"if it reads off: wait {left:.0f} s with the plug off (the cycle asked "
            f"{off_seconds:g} s off; it went off on {clock_name(record.clock)}, which "
            f"{clock_name(clock)} here cannot measure: the full off time)"))]
    return [PlannedStep("wait off", node, f"if it reads off: wait {left:.0f} s more with the "
                                          f"plug off (the cycle asked {off_seconds:g} s off)")]


def cycle_off_seconds(record: WorkflowRecord, config: Config) -> float:
    """The off time the interrupted workflow asked for (resume honours it)."""
    asked = record.detail.get("off_seconds")
    if isinstance(asked, int | float) and not isinstance(asked, bool) and 0 < asked <= 3600:
        return float(asked)
    return config.power.off_seconds if record.workflow in ("power-cycle", "recover") else 0.0


@dataclass(frozen=True)
class Resume:
    """Complete an unfinished workflow that may have left plugs off: read every plug
    it turned off (or was turning off) before claiming anything, turn it back on
    (after the rest of the cycle's off time), cycle a node it shut down whose plug
    was never cut, close the old record once every plug is back, then wait for
    each node. The old workflow's stale locks are removed."""

    wf: str
    kind: str = field(default="resume", init=False)

    @property
    def target(self) -> str:
        return self.wf

    def needs(self, config: Config) -> Needs:
        return Needs()

    def plan(self, state: OpsState) -> Plan:
        record = next((r for r in state.unfinished if r.wf == self.wf), None)
        if record is None:
            report = guards.GuardReport((guards.Verdict(
                "journal", self.wf, False, f"no unfinished workflow {self.wf!r} in the "
                                           f"journal -> `sparktui power resume` lists them"),))
            return Plan(self.kind, self.wf, report, (), self)
        entities = plugs_left_off(record, state.config)
        dark = shut_not_cut(record, state.config)
        nodes = tuple(n for n, _ in [*entities, *dark])
        verdicts = [guards.Verdict("journal", self.wf, True, record.describe())]
        if not entities and not dark:
            verdicts.append(guards.Verdict(
                "journal", self.wf, False,
                f"{self.wf} left no plug off: nothing to complete -> close it "
                f"(`sparktui power resume {self.wf} --close REASON`)"))
        others = {n: who for n, who in state.holders().items()  # a stale lock holds nothing
                  if (lk := state.lock(n)) is not None and lk.wf != self.wf}
        verdicts += [guards.runlock(n, others) for n in nodes]
        if entities or dark:
            verdicts.append(guards.home_assistant(self.wf, state.power_error))
        stale = [lock.node for lock in state.locks if lock.wf == self.wf]
        steps = [PlannedStep("close lock", n, f"remove {n}'s stale lock of {self.wf}")
                 for n in stale]
        off_s = cycle_off_seconds(record, state.config)
        now = state.snapshot.taken_at
        for node, entity in entities:
            steps += left_off_steps(record, node, entity, off_s, now, state.clock)
        for node, entity in dark:
            steps += dark_steps(record, state.config, node, entity)
        steps += [s for node in back_nodes(record, state.config)
                  for s in back_steps(state.config.power.boot_timeout_s, node)]
        return Plan(self.kind, self.wf, guards.GuardReport(tuple(verdicts)), tuple(steps), self,
                    nodes=nodes, entities=tuple(e for _, e in [*entities, *dark]),
                    detail={"resumes": self.wf, "nodes": list(nodes)},
                    data=(record, tuple(stale)))

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        """Every plug first (what the old workflow owes), then its end (the
        obligation is met: a node that does not come back is this resume's
        failure, not an open power cycle), then each node is waited for."""
        ctx = run.ctx
        record, stale = plan.data
        hold_way_out(run)
        for node in stale:
            ctx.locks.close(node)
        run.lock(list(plan.nodes))
        said: dict[str, str] = {}
        off_s = cycle_off_seconds(record, ctx.config)
        told = shut_down_nodes(record)
        back: list[str] = []  # the nodes whose plugs are on once the plug steps are done
        clock = clock_of(ctx.clock)
        keep_off = record.workflow in KEEP_OFF
        for node, entity in plugs_left_off(record, ctx.config):
            reads = await plug_read(run, entity,
                                    settled_after(record, entity, ctx.clock.time(), clock))
            if reads.state == "off" and keep_off:  # what the power-off meant
                said[node] = f"{entity} read off: left off, as {record.workflow} meant"
            elif reads.state == "off":
                if (left := off_time_left(record, entity, off_s, ctx.clock.time(), clock)) > 0:
                    await wait_off(run, node, left, more=True)
                await plug_on(run, node, entity)
                back.append(node)
            elif node in told or keep_off:  # dark with its plug on, or a cut never landed
                if await cut_and_cycle(run, record, node, entity, off_s, said):
                    back.append(node)
            else:  # nothing to switch, nothing to wait for: no off time is claimed
                said[node] = f"{entity} read {reads.state}: it was not left off"
        for node, entity in shut_not_cut(record, ctx.config):
            await plug_read(run, entity)
            if await cut_and_cycle(run, record, node, entity, off_s, said):
                back.append(node)
        rest = unreached_note(record, ctx.config)
        if rest:
            said["unreached"] = rest
        ctx.journal.append(record.wf, "end", workflow=record.workflow, target=record.target,
                           ok=False, message=(
                               f"completed by {run.wf}: every plug it turned off is off, as "
                               f"it meant" + (f"; {rest}" if rest else "")) if keep_off else
                           f"completed by {run.wf}: every plug it left off is on again")
        for node in back:
            back_said = (await wait_back(run, node))["summary"]
            said[node] = f"{said[node]}; {back_said}" if node in said else str(back_said)
        run.finish(True, "; ".join(said.values()) or "nothing left off",
                   {"resumed": record.wf})


async def cut_and_cycle(run: WorkflowRun, record: WorkflowRecord, node: str, entity: str,
                        off_s: float, said: dict[str, str]) -> bool:
    """A node told to shut down whose plug is on (or, for a power-off, any plug
    it was cutting that reads on): cut it; a cycle then waits its off time and
    turns it back on (True), a power-off leaves it cut (what it meant: False)."""
    await plug_off(run, node, entity)
    if record.workflow in KEEP_OFF:
        run.settle(entity)  # off is what that workflow meant
        said[node] = f"{node} off ({entity} cut, as {record.workflow} meant)"
        return False
    await wait_off(run, node, off_s)
    await plug_on(run, node, entity)
    return True


def shut_down_nodes(record: WorkflowRecord) -> set[str]:
    """Nodes this workflow told to shut down (``poweroff`` began)."""
    return {s.target for s in record.steps if s.step == "poweroff"}


def back_nodes(record: WorkflowRecord, config: Config) -> list[str]:
    """The nodes a resume of `record` plans to wait for once their plugs are on:
    every node a cycle may have left off; none of a power-off (off is what it
    meant)."""
    if record.workflow in KEEP_OFF:
        return []
    return list(dict.fromkeys([n for n, _ in plugs_left_off(record, config)]
                              + [n for n, _ in shut_not_cut(record, config)]))


def left_off_steps(record: WorkflowRecord, node: str, entity: str, off_s: float, now: float,
                   clock: str) -> list[PlannedStep]:
    """What a resume plans for a plug `record` turned (or was turning) off:
    read it; a cycle turns one that reads off back on (after the rest of its
    off time) and cuts and cycles one that reads on if its node was told to
    shut down; a power-off leaves one that reads off off and cuts one that
    reads on."""
    read = PlannedStep("plug read", entity, plug_read_action(entity))
    if record.workflow in KEEP_OFF:
        return [read, PlannedStep("plug off", entity, (
            f"if it reads on: {_why_cut(record, node)}: {plug_action(entity, False)}; "
            f"if it reads off: left off, as {record.workflow} meant"))]
    cut = ([PlannedStep("plug off", entity, f"if it reads on: {node} was told to shut down, "
                                            f"only a plug cycle boots it: "
                                            f"{plug_action(entity, False)}, wait {off_s:g} s")]
           if node in shut_down_nodes(record) else [])
    return [read, *rest_off_step(record, node, entity, off_s, now, clock), *cut,
            PlannedStep("plug on", entity, f"if it reads off: {plug_action(entity, True)}")]


def _why_cut(record: WorkflowRecord, node: str) -> str:
    """Why a power-off's resume cuts `node`'s plug that reads on."""
    return (f"{node} was told to shut down" if node in shut_down_nodes(record)
            else f"{record.workflow} was cutting it")


def offer_action(record: WorkflowRecord, config: Config, now: float, clock: str) -> str:
    """What a resume of `record` will do, case by case, as the operator is
    offered it before any plug is read ("" when it leaves nothing to switch:
    it can only be closed)."""
    left, dark = plugs_left_off(record, config), shut_not_cut(record, config)
    if not left and not dark:
        return ""
    keep_off, told = record.workflow in KEEP_OFF, shut_down_nodes(record)
    off_s = cycle_off_seconds(record, config)
    parts = []
    for node, entity in left:
        if keep_off:
            parts.append(f"read {entity}: if it reads off, leave it off ({record.workflow} "
                         f"meant it); if it reads on, {_why_cut(record, node)}: cut it")
            continue
        waits = [s.action.removeprefix("if it reads off: ")
                 for s in rest_off_step(record, node, entity, off_s, now, clock)]
        on = (f"{node} was told to shut down and only a plug cycle boots it: cut it, wait "
              f"{off_s:g} s, turn it back on" if node in told
              else "it was never off: nothing to switch")
        parts.append(f"read {entity}: if it reads off, {', '.join([*waits, 'turn it back on'])}"
                     f"; if it reads on, {on}")
    for node, entity in dark:
        parts.append(f"{node} was told to shut down and its plug was never cut: read {entity}, "
                     f"cut it" + ("" if keep_off else f", wait {off_s:g} s, turn it back on"))
    back = back_nodes(record, config)
    rest = unreached_note(record, config)
    return ("; ".join(parts) + (f"; then wait for {', '.join(back)} and re-check" if back else "")
            + (f"; {rest}" if rest else "") + f" (`sparktui power resume {record.wf}`)")


def unreached_note(record: WorkflowRecord, config: Config) -> str:
    """A cluster power-off's nodes and shared switches it never began to switch
    off, and the command that finishes it ("" when none, or another workflow)."""
    if record.workflow != "cluster-power-off":
        return ""
    begun = {s.target for s in record.steps if s.step in ("poweroff", "plug off",
                                                          "switch off")}
    nodes = [n for n in record.detail.get("nodes") or [] if isinstance(n, str)
             and n not in begun and (n not in config.nodes or config.nodes[n].switch
                                     not in begun)]
    switches = [e for e in record.detail.get("switches") or []
                if isinstance(e, str) and e not in begun]
    if not nodes and not switches:
        return ""
    return (f"never reached: {', '.join([*nodes, *switches])} -> to finish the power-off: "
            f"`sparktui power cluster off {record.target}` (its guards run again)")


KEEP_OFF = ("power-off", "cluster-power-off")
"""Workflows that meant their nodes to stay off (a resume cuts a dark node's plug)."""


def shut_not_cut(record: WorkflowRecord, config: Config) -> list[tuple[str, str]]:
    """(node, entity) of nodes this workflow told to shut down (``poweroff``
    began) whose plug it never began to cut: killed during "wait dark", such a
    node may be dark with its plug on, and only a plug cycle boots it."""
    told = [s.target for s in record.steps if s.step == "poweroff"]
    cut = {s.target for s in record.steps if s.step == "plug off"}
    return [(n, config.nodes[n].switch) for n in dict.fromkeys(told)
            if n in config.nodes and config.nodes[n].switch not in cut]


def dark_steps(record: WorkflowRecord, config: Config, node: str, entity: str
               ) -> list[PlannedStep]:
    """What a resume does for a node left shut down with its plug on: read the
    plug, cut it; a cycle also waits its off time and turns it on (the wait for
    the node comes after every plug: `back_nodes`)."""
    steps = [PlannedStep("plug read", entity, plug_read_action(entity)),
             PlannedStep("plug off", entity, plug_action(entity, False)
                         + f"  ({node} was told to shut down; its plug was never cut)")]
    if record.workflow in KEEP_OFF:
        return steps
    off_s = cycle_off_seconds(record, config)
    return [*steps, PlannedStep("wait off", node, f"wait {off_s:g} s with the plug off"),
            PlannedStep("plug on", entity, plug_action(entity, True))]


def plugs_left_off(record: WorkflowRecord, config: Config) -> list[tuple[str, str]]:
    """(node, entity) of node plugs this workflow turned (or may have turned) off
    and did not confirm on again; shared switches are never turned back on here."""
    by_entity = {n.switch: n.name for n in config.nodes.values()}
    state: dict[str, bool] = {}
    for s in record.steps:
        if s.step == "plug off":
            state[s.target] = True  # off, or in doubt
        elif s.step == "plug on" and s.ok:
            state[s.target] = False
    return [(by_entity[e], e) for e, off in state.items() if off and e in by_entity]
