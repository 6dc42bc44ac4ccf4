"""Power a node through its Home Assistant plug: cycle, on, off.

A cycle is: guards -> lock -> [a node that answers SSH: ``systemctl poweroff``,
wait until it is dark (the graceful reboot: the OS shuts down cleanly, the plug
cycle gives the cold boot)] -> plug off (confirmed) -> wait ``[power]
off_seconds`` (35 s in the seeds' runbook) -> plug on (confirmed) -> wait for
liveness -> wait for SSH -> re-check (snapshot: kernel, NAS mount, HF cache).
A starved or unreachable node (or ``--hard``) gets the plug at once, and the
plan says why. A power-off first stops the lanes running on the node
(``stop.lanes_on``).
From the moment the plug may be off until it is confirmed on again, the run
owes "turn it back on": a failure or cancellation in between leaves the
workflow unfinished in the journal, and `Resume` completes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from sparktui.adapters.homeassistant import (
    HomeAssistantError,
    SwitchState,
    SwitchUnavailable,
)
from sparktui.core.config import Config
from sparktui.core.errors import RemoteError, describe_error
from sparktui.core.state import ClusterSnapshot, NodeState
from sparktui.ops import guards
from sparktui.ops.context import OpsContext, Power
from sparktui.ops.journal import JournalError
from sparktui.ops.plan import Needs, OpsState, Plan, PlannedStep, Workflow
from sparktui.ops.workflows.runner import StepFailed, WorkflowRun
from sparktui.ops.workflows.stop import lanes_on, plan_stop, stop_ranks
from sparktui.watch.readiness import RankContainer

SSH_CHECK = ": sparktui-ssh-check; uname -r"
SSH_CHECK_TIMEOUT_S = 10.0
WAIT_POLL_S = 2.0
MIN_ATTEMPTS = 3
"""A wait gives up only after its deadline AND this many attempts, so a slow
attempt (a starved sshd) cannot use the whole budget alone."""


def plug_action(entity: str, on: bool) -> str:
    service = "turn_on" if on else "turn_off"
    return (f"POST /api/services/switch/{service} {{\"entity_id\": \"{entity}\"}}, "
            f"then GET /api/states/{entity} until {'on' if on else 'off'}")


def back_steps(config_boot_s: float, node: str) -> list[PlannedStep]:
    return [
        PlannedStep("liveness", node, f"wait up to {config_boot_s:g} s for liveness"),
        PlannedStep("ssh", node, f"wait up to {config_boot_s:g} s for `{SSH_CHECK}`"),
        PlannedStep("re-check", node, "one probe: kernel, NAS mount, HF cache"),
    ]


def plan_power(config: Config, node: str, action: str,
               off_seconds: float | None = None) -> list[PlannedStep]:
    """The steps of ``power cycle|on|off NODE`` (the confirm modal's "what will happen")."""
    entity = config.nodes[node].switch
    off_s = config.power.off_seconds if off_seconds is None else off_seconds
    boot = config.power.boot_timeout_s
    if action == "off":
        return [PlannedStep("plug off", entity, plug_action(entity, False))]
    if action == "on":
        return [PlannedStep("plug on", entity, plug_action(entity, True)),
                *back_steps(boot, node)]
    return [PlannedStep("plug off", entity, plug_action(entity, False)),
            PlannedStep("wait off", node, f"wait {off_s:g} s with the plug off"),
            PlannedStep("plug on", entity, plug_action(entity, True)),
            *back_steps(boot, node)]


def _power(ctx: OpsContext) -> Power:
    if ctx.power is None:
        raise HomeAssistantError(f"Home Assistant is not available: {ctx.power_error}")
    return ctx.power


POWEROFF = ": sparktui-poweroff; systemctl poweroff"
POWEROFF_TIMEOUT_S = 30.0
GRACEFUL = ""
"""A node's mode when it is powered off gracefully (else: why it is hard-cut)."""


def power_off_modes(config: Config, nodes: Sequence[str], snapshot: ClusterSnapshot | None,
                    hard: bool) -> dict[str, str]:
    """node -> GRACEFUL, or the reason its plug is cut without a shutdown."""
    modes = {}
    for n in nodes:
        snap = snapshot.get(n) if snapshot else None
        if hard:
            modes[n] = "--hard"
        elif snap is None:
            modes[n] = "not observed"
        elif snap.state is NodeState.ONLINE:
            modes[n] = GRACEFUL
        elif snap.state is NodeState.STARVED:
            modes[n] = "starved (ping answers, SSH does not): it cannot shut itself down"
        elif snap.state is NodeState.POWERED_OFF:
            modes[n] = "already off"
        else:
            modes[n] = f"{snap.state.value}: SSH does not answer"
    return modes


def graceful_off_steps(config: Config, nodes: Sequence[str]) -> list[PlannedStep]:
    """The shutdown before the plugs of ``nodes`` are cut (graceful power-off)."""
    timeout = config.power.poweroff_timeout_s
    return [*(PlannedStep("poweroff", n, POWEROFF) for n in nodes),
            *(PlannedStep("wait dark", n, f"until SSH and liveness stop answering (at most "
                                         f"{timeout:g} s, then cut anyway)") for n in nodes)]


def plug_check_action(entity: str) -> str:
    return (f"GET /api/states/{entity}: the plug must answer before the node shuts down "
            f"(a node shut down whose plug cannot be switched stays off)")


def shutdown_first(config: Config, node: str, steps: Sequence[PlannedStep],
                   why: str) -> list[PlannedStep]:
    """``steps`` (a plug cut and what follows) preceded by the graceful shutdown
    when ``why`` is GRACEFUL (after a fresh read of the node's plug: a node
    shut down whose plug cannot be switched stays dark), else with the cut
    marked hard and why."""
    if why == GRACEFUL:
        entity = config.nodes[node].switch
        return [PlannedStep("plug check", entity, plug_check_action(entity)),
                *graceful_off_steps(config, [node]), *steps]
    return [replace(s, action=f"{s.action}  (hard cut: {why})") if s.step == "plug off" else s
            for s in steps]


async def plug_check(run: WorkflowRun, entity: str) -> None:
    """Immediately before a node is shut down (cycle, power-off, cluster off):
    Home Assistant answers for the node's plug and the plug is available, else
    nothing is done. The ``home-assistant`` guard only knows a token was loaded;
    this read is the proof that the plug can bring the node back."""
    async def go() -> SwitchState:
        state = await _power(run.ctx).state(entity)
        if not state.available:
            raise SwitchUnavailable(f"{entity} is {state.state} in Home Assistant: the node "
                                    f"is not shut down (its plug could not bring it back)")
        return state

    await run.step("plug check", entity, plug_check_action(entity), go,
                   describe=lambda st: f"{entity} reads {st.state}")


async def shut_down(run: WorkflowRun, node: str, modes: dict[str, str]) -> None:
    """The graceful part of a power-off or a cycle of one node: ``systemctl
    poweroff``, then wait until dark (either may turn the node into a hard cut,
    with the reason in ``modes``)."""
    if modes.get(node) == GRACEFUL:
        await poweroff(run, node, modes)
    if modes.get(node) == GRACEFUL:
        await wait_dark(run, node, modes)


async def poweroff(run: WorkflowRun, node: str, modes: dict[str, str]) -> None:
    """``systemctl poweroff``; a refusal (no right to power off) turns the node
    into a hard cut with the reason, a dropped connection is the shutdown."""
    ctx = run.ctx

    async def go() -> str:
        try:
            res = await ctx.link(node).run(POWEROFF, POWEROFF_TIMEOUT_S)
        except RemoteError as exc:
            return f"connection closed ({exc.message})"
        if res.exit_status not in (0, None):
            why = (res.stderr or res.stdout).strip()[:160]
            modes[node] = f"systemctl poweroff refused (exit {res.exit_status}: {why})"
            return modes[node]
        return "shutting down"

    await run.step("poweroff", node, POWEROFF, go, describe=lambda s: s)


async def wait_dark(run: WorkflowRun, node: str, modes: dict[str, str]) -> None:
    """Until neither SSH nor liveness answers, bounded: past the bound the plug
    is cut anyway and the result says so."""
    ctx = run.ctx
    clock = ctx.clock
    timeout = ctx.config.power.poweroff_timeout_s

    async def ssh_answers() -> bool:
        try:
            return (await ctx.link(node).run(SSH_CHECK, SSH_CHECK_TIMEOUT_S)).exit_status == 0
        except RemoteError:
            return False

    async def go() -> str:
        start = clock.monotonic()
        while True:
            if not await ctx.alive(node) and not await ssh_answers():
                return f"dark after {clock.monotonic() - start:.0f} s"
            if clock.monotonic() - start >= timeout:
                modes[node] = f"still answering {timeout:g} s after systemctl poweroff"
                return modes[node] + ": cutting anyway"
            await clock.sleep(WAIT_POLL_S)

    await run.step("wait dark", node, f"until SSH and liveness stop answering (at most "
                                      f"{timeout:g} s)", go, describe=lambda s: s)



async def plug_off(run: WorkflowRun, node: str, entity: str) -> None:
    """Turn the plug off. From the moment the call is sent, the run owes turning
    it back on; a call that fails before that (HA down, plug unavailable) or
    whose plug still reads on afterwards owes nothing."""
    ctx = run.ctx

    async def go() -> SwitchState:
        power = _power(ctx)
        before = await power.state(entity)
        if not before.available:
            raise SwitchUnavailable(f"{entity} is {before.state} in Home Assistant (the plug is "
                                    f"offline or not paired): nothing was switched")
        run.owe(entity, f"{entity} ({node}) may be off: turn it back on "
                        f"(`sparktui power resume`)")
        return await power.turn(entity, False)

    try:
        await run.step("plug off", entity, plug_action(entity, False), go,
                       describe=lambda s: f"{entity} confirmed {s.state}")
    except Exception:
        if entity in run.obligations and await _still_on(ctx, entity):
            run.settle(entity)
        raise


async def _still_on(ctx: OpsContext, entity: str) -> bool:
    try:
        return (await _power(ctx).state(entity)).state == "on"
    except HomeAssistantError:
        return False


async def plug_on(run: WorkflowRun, node: str, entity: str) -> None:
    """Turn the plug back on: the way out of every plug off (journaled from the
    reserve when the disk filled)."""
    ctx = run.ctx
    with ctx.journal.way_out():
        await run.step("plug on", entity, plug_action(entity, True),
                       lambda: _power(ctx).turn(entity, True),
                       describe=lambda s: f"{entity} confirmed {s.state}")
    run.settle(entity)


def hold_way_out(run: WorkflowRun) -> None:
    """Before a power workflow switches anything: the journal's reserve is held
    (a plug turned off can be journaled back on if the disk fills), or the
    workflow refuses to start (`Journal.reserve`)."""
    run.ctx.journal.reserve()


async def wait_off(run: WorkflowRun, node: str, seconds: float, more: bool = False) -> None:
    """Wait with the plug off; ``more``: the rest of an interrupted cycle's off
    time (the result says only what was waited now, not a total it did not see)."""
    async def wait() -> float:
        await run.ctx.clock.sleep(seconds)
        return seconds

    what = "more " if more else ""
    await run.step("wait off", node, f"wait {seconds:g} s {what}with the plug off", wait,
                   describe=lambda s: f"{s:g} s {what}off")


async def wait_back(run: WorkflowRun, node: str) -> dict[str, object]:
    """Liveness, then SSH, then one probe; returns the re-check's findings."""
    ctx = run.ctx
    clock = ctx.clock
    timeout = ctx.config.power.boot_timeout_s
    t0 = clock.monotonic()

    async def until(check_name: str, check: Callable[[], Awaitable[bool]]) -> float:
        start = clock.monotonic()
        deadline = t0 + timeout
        attempts = 0
        while True:
            attempts += 1
            if await check():
                return clock.monotonic() - start
            if clock.monotonic() >= deadline and attempts >= MIN_ATTEMPTS:
                raise TimeoutError(f"{node}: no {check_name} after {timeout:g} s "
                                   f"({attempts} attempts) -> check the node's console")
            if attempts % 5 == 0:
                run.progress(check_name, node, f"still waiting ({attempts} attempts, "
                                               f"{clock.monotonic() - start:.0f} s)")
            await clock.sleep(WAIT_POLL_S)

    async def ssh_ok() -> bool:
        try:
            return (await ctx.link(node).run(SSH_CHECK, SSH_CHECK_TIMEOUT_S)).exit_status == 0
        except RemoteError:
            return False

    boot = ctx.config.power.boot_timeout_s
    await run.step("liveness", node, f"wait up to {boot:g} s for liveness",
                   lambda: until("liveness", lambda: ctx.alive(node)),
                   describe=lambda s: f"alive after {s:.0f} s")
    await run.step("ssh", node, f"wait up to {boot:g} s for `{SSH_CHECK}`",
                   lambda: until("ssh", ssh_ok), describe=lambda s: f"SSH answers after {s:.0f} s")
    return await run.step("re-check", node, "one probe: kernel, NAS mount, HF cache",
                          lambda: recheck(ctx, node),
                          describe=lambda d: str(d["summary"]), detail=lambda d: d)


async def recheck(ctx: OpsContext, node: str) -> dict[str, object]:
    snap = (await ctx.snapshot([node])).get(node)
    on = guards.online(snap, node)
    if not on.passed:
        raise RemoteError(node, "probe", on.message)
    assert snap is not None and snap.probe is not None
    cfg = ctx.config.nodes[node]
    checks = [guards.kernel(ctx.config, node, snap.probe.kernel), guards.nas_mount(cfg, snap),
              guards.hf_cache(cfg, snap)]
    problems = [v.message for v in checks if not v.passed]
    mem = snap.probe.meminfo
    summary = (f"{node} back: kernel {snap.probe.kernel}"
               + (f", MemAvailable {mem.available_gib:.1f} GiB" if mem else "")
               + ("" if not problems else "; BUT " + "; ".join(problems)))
    return {"summary": summary, "kernel": snap.probe.kernel, "problems": problems}


async def cycle_in(run: WorkflowRun, node: str, off_seconds: float,
                   modes: dict[str, str] | None = None) -> dict[str, object]:
    """The cycle's steps inside an open run (used by power-cycle and recover);
    ``modes[node]`` GRACEFUL shuts the node down before its plug is cut.
    Once the plug may be off: a failure tries to turn it back on at once, and an
    interruption says what the plug reads and how to resume (`_plug_left`).
    A node shut down whose plug was never cut stays off: the operator is told."""
    entity = run.ctx.config.nodes[node].switch
    hold_way_out(run)
    shutdown_sent = False
    try:
        if modes is not None and modes.get(node) == GRACEFUL:
            await plug_check(run, entity)
            shutdown_sent = True
            await shut_down(run, node, modes)
        await plug_off(run, node, entity)
        await wait_off(run, node, off_seconds)
        await plug_on(run, node, entity)
    except BaseException as exc:
        if entity not in run.obligations:
            if shutdown_sent:  # halted with its plug on: only a plug cycle boots it
                said = (f"{node} was told to shut down and its plug was not cycled: it stays "
                        f"off -> `sparktui power cycle {node} --hard` boots it")
                run.progress("plug state", entity, said)
                with contextlib.suppress(JournalError):
                    run.ctx.journal.append(run.wf, "note", workflow=run.kind,
                                           target=run.target,
                                           message=f"after {_what(exc)}: {said}")
                if isinstance(exc, StepFailed):
                    raise StepFailed(exc.step, exc.target, f"{exc.message}; {said}") from exc
            raise  # the plug was never switched off: nothing to restore
        said = await _plug_left(run, node, entity, exc)
        if isinstance(exc, StepFailed):
            raise StepFailed(exc.step, exc.target, f"{exc.message}; {said}") from exc
        if isinstance(exc, JournalError):
            raise JournalError(f"{exc}; {said}") from exc
        raise
    return await wait_back(run, node)


async def _plug_left(run: WorkflowRun, node: str, entity: str, exc: BaseException) -> str:
    """After a failure with the plug possibly off: turn it back on (the operator
    asked for a cycle, not for off), then re-read it and say what it reads.
    After an interruption (Ctrl-C, SIGTERM): only re-read it and give the exact
    resume command. Restoring is not held back by a broken journal: a plug
    left off is the greater harm, and the operator is told."""
    ctx = run.ctx
    if not isinstance(exc, asyncio.CancelledError | KeyboardInterrupt) and ctx.power is not None:
        restore = plug_action(entity, True)
        try:
            with ctx.journal.way_out():
                await run.step("plug on", entity, f"restore power after the failure: {restore}",
                               lambda: _power(ctx).turn(entity, True),
                               describe=lambda st: f"{entity} confirmed {st.state}")
        except JournalError:
            with contextlib.suppress(HomeAssistantError):
                async with asyncio.timeout(ctx.config.home_assistant.timeout_s * 3):
                    await _power(ctx).turn(entity, True)
        except StepFailed:
            pass

    def say(reads: str) -> str:
        if reads == "on":
            run.settle(entity)
            return f"{entity} reads on (re-read now): power is back; the node boots"
        return (f"{entity} reads {reads} (re-read now): {node} may be left without power -> "
                f"`sparktui power resume {run.wf}`")

    return await tell_plug(run, entity, exc, say)


async def tell_plug(run: WorkflowRun, entity: str, exc: BaseException,
                    say: Callable[[str], str]) -> str:
    """Re-read `entity` after `exc` and tell the operator (progress line and a
    journal note) what `say` makes of what it reads; returns that sentence."""
    said = say(await _read_plug(run.ctx, entity))
    run.progress("plug state", entity, said)
    with contextlib.suppress(JournalError):
        run.ctx.journal.append(run.wf, "note", workflow=run.kind, target=run.target,
                               message=f"after {_what(exc)}: {said}")
    return said


async def _read_plug(ctx: OpsContext, entity: str) -> str:
    """The plug's state as Home Assistant reports it now, or why it is unknown."""
    if ctx.power is None:
        return f"unknown (Home Assistant is not available: {ctx.power_error})"
    try:
        async with asyncio.timeout(ctx.config.home_assistant.timeout_s + 1):
            return (await ctx.power.state(entity)).state
    except (HomeAssistantError, TimeoutError) as exc:
        return f"unknown ({describe_error(exc)})"


def _what(exc: BaseException) -> str:
    if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
        return "the interruption"
    return "the failure"


def _power_plan(kind: str, node: str, action: str, state: OpsState, steps: list[PlannedStep],
                workflow: Workflow, detail: dict[str, object],
                extra: Sequence[guards.Verdict] = (), sees_lanes: bool = True) -> Plan:
    """The plan of a one-node power action; the node's snapshot (when it answered)
    says what the action would kill (a protected lane's rank refuses), unless
    ``sees_lanes`` is False (a power-off stops the lanes first: ``extra``)."""
    config = state.config
    report = guards.evaluate_power(config, node, action, state.holders(),
                                   state.snapshot.get(node) if sees_lanes else None,
                                   state.power_error)
    if extra:
        report = guards.merged(report, extra)
    entity = config.nodes[node].switch if node in config.nodes else ""
    return Plan(kind, node, report, tuple(steps), workflow, nodes=(node,),
                entities=(entity,) if entity else (), detail={"node": node, "entity": entity,
                                                              **detail})


@dataclass(frozen=True)
class NodeCycle:
    """A plug cycle of one node (power cycle, recover): it reads the node's probe,
    which says what the cycle would kill."""

    node: str
    off_seconds: float | None = None

    @property
    def target(self) -> str:
        return self.node

    def off_s(self, config: Config) -> float:
        return config.power.off_seconds if self.off_seconds is None else self.off_seconds

    def needs(self, config: Config) -> Needs:
        return Needs(nodes=(self.node,) if self.node in config.nodes else ())


@dataclass(frozen=True)
class PowerCycle(NodeCycle):
    """``power cycle NODE [--hard]``: a node that answers SSH is shut down
    (``systemctl poweroff``, wait until dark) before its plug is cycled; a
    starved or unreachable one, or ``--hard``, gets the plug at once."""

    hard: bool = False
    kind: str = field(default="power-cycle", init=False)

    def plan(self, state: OpsState) -> Plan:
        off_s = self.off_s(state.config)
        if self.node not in state.config.nodes:
            return _power_plan(self.kind, self.node, "power cycle", state, [], self, {})
        why = power_off_modes(state.config, (self.node,), state.snapshot, self.hard)[self.node]
        steps = shutdown_first(state.config, self.node,
                               plan_power(state.config, self.node, "cycle", off_s), why)
        plan = _power_plan(self.kind, self.node, "power cycle", state, steps, self,
                           {"off_seconds": off_s, **({"hard_cut": why} if why else {})})
        return replace(plan, data={self.node: why})

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        run.lock([self.node])
        modes: dict[str, str] = dict(plan.data or {self.node: "--hard"})
        found = await cycle_in(run, self.node, self.off_s(run.ctx.config), modes)
        how = "shut down first" if not modes[self.node] else f"hard cut: {modes[self.node]}"
        run.finish(True, f"{found['summary']} ({how})", {**found, "hard_cut": modes[self.node]})


@dataclass(frozen=True)
class OffPlan:
    """What a power-off's run needs beyond its steps."""

    modes: Mapping[str, str]
    """node -> GRACEFUL, or why its plug is cut without a shutdown."""
    stops: Mapping[str, tuple[RankContainer, ...]] = field(default_factory=dict)
    """The lanes stopped first, with their ranks (``stop.lanes_on``)."""
    memory_on: tuple[str, ...] = ()
    """Nodes that stay on whose memory the stop waits for."""

    @property
    def ranks(self) -> tuple[RankContainer, ...]:
        return tuple(r for ranks in self.stops.values() for r in ranks)

    def lock_containers(self, nodes: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
        """Every node the run acts on (``nodes`` and the stopped ranks' nodes) and
        the containers it stops on each, for the run lock."""
        every = list(dict.fromkeys([*nodes, *(r.node for r in self.ranks)]))
        return every, {n: [r.container for r in self.ranks if r.node == n] for n in every}

    def lanes(self) -> list[str]:
        return sorted(self.stops)


def off_plan(state: OpsState, nodes: Sequence[str], hard: bool
             ) -> tuple[OffPlan, list[guards.Verdict], list[PlannedStep]]:
    """The part every power-off shares: the lanes on ``nodes`` stopped first (with
    the stop's guards), and each node's mode. Returns the run's data, the
    verdicts and the stop steps."""
    verdicts, stops = lanes_on(state, nodes)
    off = OffPlan(power_off_modes(state.config, nodes, state.snapshot, hard), stops)
    off = replace(off, memory_on=tuple(sorted({r.node for r in off.ranks} - set(nodes))))
    return off, verdicts, plan_stop(off.ranks, off.memory_on) if off.ranks else []


async def stop_lanes_first(run: WorkflowRun, off: OffPlan) -> str:
    """Stop the lanes a power-off would kill; a stop that failed is said (the
    shutdown or the cut ends that rank anyway). Returns what to add to the
    result's message."""
    if not off.ranks:
        return ""
    _, failed = await stop_ranks(run, off.stops, off.memory_on)
    said = f"; stopped first: {', '.join(off.lanes())}"
    if failed:
        said += " (" + "; ".join(str(f) for f in failed) + ": the power-off ends it)"
    return said


@dataclass(frozen=True)
class PowerSwitch:
    """``power on|off NODE`` (an off node runs nothing: power on probes nothing).
    Off first stops the lanes running on the node (guards as for stop), then is
    graceful for a node that answers: ``systemctl poweroff``, wait until dark,
    then the plug; a starved or unreachable node (or ``--hard``) is cut at once
    and the plan says why."""

    node: str
    on: bool
    hard: bool = False
    """Off: cut the plug at once, no ``systemctl poweroff`` first."""

    @property
    def kind(self) -> str:
        return "power-on" if self.on else "power-off"

    @property
    def target(self) -> str:
        return self.node

    def needs(self, config: Config) -> Needs:
        """A power-off reads every node: the lanes it stops may have ranks anywhere."""
        return Needs(nodes=tuple(config.nodes) if self.node in config.nodes and not self.on
                     else ())

    def plan(self, state: OpsState) -> Plan:
        action = "on" if self.on else "off"
        config, node = state.config, self.node
        if node not in config.nodes:
            return _power_plan(self.kind, node, f"power {action}", state, [], self, {})
        if self.on:
            return _power_plan(self.kind, node, "power on", state,
                               plan_power(config, node, "on"), self, {})
        off, verdicts, stops = off_plan(state, [node], self.hard)
        why = off.modes[node]
        steps = [*stops, *shutdown_first(config, node, plan_power(config, node, "off"), why)]
        plan = _power_plan(self.kind, node, "power off", state, steps, self,
                           {**({"hard_cut": why} if why else {}),
                            **({"stops": off.lanes()} if off.ranks else {})},
                           verdicts, sees_lanes=False)
        return replace(plan, data=off)

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        ctx, node = run.ctx, self.node
        entity = ctx.config.nodes[node].switch
        if self.on:
            hold_way_out(run)
            run.lock([node])
            await plug_on(run, node, entity)
            found = await wait_back(run, node)
            run.finish(True, str(found["summary"]), found)
            return
        off: OffPlan = plan.data
        hold_way_out(run)
        run.lock(*off.lock_containers([node]))
        stopped = await stop_lanes_first(run, off)
        modes = dict(off.modes)
        if modes.get(node) == GRACEFUL:
            await plug_check(run, entity)
        await shut_down(run, node, modes)
        await run.step("plug off", entity, plug_action(entity, False),
                       lambda: _power(ctx).turn(entity, False),
                       describe=lambda s: f"{entity} confirmed {s.state}")
        how = "shut down first" if not modes[node] else f"hard cut: {modes[node]}"
        run.finish(True, f"{node} powered off ({entity} off; {how}){stopped}",
                   {"hard_cut": modes[node], "stopped": off.lanes()})
