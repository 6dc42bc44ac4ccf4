"""Power a node through its Home Assistant plug: cycle, on, off.

A cycle is: guards -> lock -> plug off (confirmed) -> wait ``[power]
off_seconds`` (35 s in the seeds' runbook) -> plug on (confirmed) -> wait for
liveness -> wait for SSH -> re-check (snapshot: kernel, NAS mount, HF cache).
From the moment the plug may be off until it is confirmed on again, the run
owes "turn it back on": a failure or cancellation in between leaves the
workflow unfinished in the journal, and `resume_power` completes it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from sparktui.adapters.homeassistant import HomeAssistantError, SwitchState, SwitchUnavailable
from sparktui.core.config import Config
from sparktui.core.errors import RemoteError, describe_error
from sparktui.core.state import NodeSnapshot
from sparktui.ops import guards
from sparktui.ops.context import OpsContext, Power
from sparktui.ops.journal import JournalError, WorkflowRecord
from sparktui.ops.workflows.runner import PlannedStep, StepFailed, WorkflowResult, WorkflowRun

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
    ctx = run.ctx
    await run.step("plug on", entity, plug_action(entity, True),
                   lambda: _power(ctx).turn(entity, True),
                   describe=lambda s: f"{entity} confirmed {s.state}")
    run.settle(entity)


async def wait_off(run: WorkflowRun, node: str, seconds: float) -> None:
    async def wait() -> float:
        await run.ctx.clock.sleep(seconds)
        return seconds

    await run.step("wait off", node, f"wait {seconds:g} s with the plug off", wait,
                   describe=lambda s: f"{s:g} s off")


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


async def cycle_in(run: WorkflowRun, node: str, off_seconds: float) -> dict[str, object]:
    """The cycle's steps inside an open run (used by power-cycle and recover).
    Once the plug may be off: a failure tries to turn it back on at once, and an
    interruption says what the plug reads and how to resume (`_plug_left`)."""
    entity = run.ctx.config.nodes[node].switch
    try:
        await plug_off(run, node, entity)
        await wait_off(run, node, off_seconds)
        await plug_on(run, node, entity)
    except BaseException as exc:
        if entity not in run.obligations:
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
            await run.step("plug on", entity, f"restore power after the failure: {restore}",
                           lambda: _power(ctx).turn(entity, True),
                           describe=lambda st: f"{entity} confirmed {st.state}")
        except JournalError:
            with contextlib.suppress(HomeAssistantError):
                await asyncio.wait_for(_power(ctx).turn(entity, True), ctx.config.home_assistant
                                       .timeout_s * 3)
        except StepFailed:
            pass
    reads = await _read_plug(ctx, entity)
    if reads == "on":
        run.settle(entity)
        said = f"{entity} reads on (re-read now): power is back; the node boots"
    else:
        said = (f"{entity} reads {reads} (re-read now): {node} may be left without power -> "
                f"`sparktui power resume {run.wf}`")
    run.progress("plug state", entity, said)
    with contextlib.suppress(JournalError):
        ctx.journal.append(run.wf, "note", workflow=run.kind, target=run.target,
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


def off_time_left(record: WorkflowRecord, entity: str, off_seconds: float, now: float) -> float:
    """How much longer `entity`'s plug must stay off for the interrupted cycle
    `record` to have been off its full `off_seconds` (0 when it already was).
    The off time counts from the plug-off confirmation, else from its intent."""
    offs = [s for s in record.steps if s.step == "plug off" and s.target == entity]
    if not offs:
        return 0.0
    since = offs[-1].finished_at if offs[-1].ok else offs[-1].started_at
    return max(0.0, min(off_seconds, off_seconds - (now - (since or now))))


def rest_off_step(record: WorkflowRecord, node: str, entity: str, off_seconds: float,
                  now: float) -> list[PlannedStep]:
    """The "wait off" a resume owes before turning `entity` back on (none when the
    plug has already been off the cycle's full off time)."""
    left = off_time_left(record, entity, off_seconds, now)
    if left <= 0:
        return []
    return [PlannedStep("wait off", node, f"wait {left:.0f} s more with the plug off (the "
                                          f"cycle asked {off_seconds:g} s off)")]


def cycle_off_seconds(record: WorkflowRecord, config: Config) -> float:
    """The off time the interrupted workflow asked for (resume honours it)."""
    asked = record.detail.get("off_seconds")
    if isinstance(asked, int | float) and not isinstance(asked, bool) and 0 < asked <= 3600:
        return float(asked)
    return config.power.off_seconds if record.workflow in ("power-cycle", "recover") else 0.0


def power_guards(ctx: OpsContext, node: str, action: str,
                 snap: NodeSnapshot | None = None) -> guards.GuardReport:
    """The power guards; give the node's latest snapshot (``snap``) so what the
    action would kill is checked too (a protected lane's rank refuses)."""
    report = guards.evaluate_power(ctx.config, node, action, ctx.locks.holders(), snap)
    if ctx.power is None:
        extra = guards.Verdict("home-assistant", node, False,
                               f"Home Assistant is not available: {ctx.power_error}")
        report = guards.GuardReport((*report.verdicts, extra))
    return report


async def power_guards_probed(ctx: OpsContext, node: str, action: str) -> guards.GuardReport:
    """`power_guards` with a fresh probe of the node (``power on`` needs none: an
    off node runs nothing). A node that does not answer runs nothing reachable."""
    snap = None
    if node in ctx.config.nodes and action != "power on":
        snap = (await ctx.snapshot([node])).get(node)
    return power_guards(ctx, node, action, snap)


async def power_cycle(ctx: OpsContext, node: str, *,
                      off_seconds: float | None = None) -> WorkflowResult:
    off_s = ctx.config.power.off_seconds if off_seconds is None else off_seconds
    report = await power_guards_probed(ctx, node, "power cycle")
    entity = ctx.config.nodes[node].switch if node in ctx.config.nodes else ""
    steps = plan_power(ctx.config, node, "cycle", off_s) if node in ctx.config.nodes else []
    async with WorkflowRun(ctx, "power-cycle", node, plan=steps,
                           detail={"node": node, "entity": entity, "off_seconds": off_s}) as run:
        run.guards(report)
        run.lock([node])
        found = await cycle_in(run, node, off_s)
        run.finish(True, str(found["summary"]), found)
    return run.outcome()


async def power_switch(ctx: OpsContext, node: str, on: bool) -> WorkflowResult:
    """``power on|off NODE``."""
    action = "on" if on else "off"
    report = await power_guards_probed(ctx, node, f"power {action}")
    entity = ctx.config.nodes[node].switch if node in ctx.config.nodes else ""
    steps = plan_power(ctx.config, node, action) if node in ctx.config.nodes else []
    async with WorkflowRun(ctx, f"power-{action}", node, plan=steps,
                           detail={"node": node, "entity": entity}) as run:
        run.guards(report)
        run.lock([node])
        if on:
            await plug_on(run, node, entity)
            found = await wait_back(run, node)
            run.finish(True, str(found["summary"]), found)
        else:
            await run.step("plug off", entity, plug_action(entity, False),
                           lambda: _power(ctx).turn(entity, False),
                           describe=lambda s: f"{entity} confirmed {s.state}")
            run.finish(True, f"{node} powered off ({entity} off)")
    return run.outcome()


async def resume_power(ctx: OpsContext, record: WorkflowRecord) -> WorkflowResult:
    """Complete an unfinished workflow that may have left plugs off: turn every
    plug it turned off (or was turning off) back on, wait for each node, and
    close the old record. Stale locks of the old workflow are removed."""
    entities = plugs_left_off(record, ctx.config)
    nodes = [n for n, e in entities]
    off_s = cycle_off_seconds(record, ctx.config)
    plan: list[PlannedStep] = []
    for node, e in entities:
        plan += [*rest_off_step(record, node, e, off_s, ctx.clock.time()),
                 PlannedStep("plug on", e, plug_action(e, True))]
    async with WorkflowRun(ctx, "resume", record.wf, plan=plan,
                           detail={"resumes": record.wf, "nodes": nodes}) as run:
        for lock in ctx.locks.list():
            if lock.wf == record.wf:
                ctx.locks.close(lock.node)
        run.lock(nodes)
        found: dict[str, object] = {}
        for node, entity in entities:
            if (left := off_time_left(record, entity, off_s, ctx.clock.time())) > 0:
                await wait_off(run, node, left)
            await plug_on(run, node, entity)
            found[node] = (await wait_back(run, node))["summary"]
        ctx.journal.append(record.wf, "end", workflow=record.workflow, target=record.target,
                           ok=False, message=f"completed by {run.wf}")
        run.finish(True, "; ".join(str(v) for v in found.values()) or "nothing left off",
                   {"resumed": record.wf})
    return run.outcome()


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
