"""``serve RECIPE --cluster C``: guards -> lock -> image sync where missing ->
GID hook -> start ranks -> follow every rank's log with the watchers ->
readiness by progress -> serving.

On the first fatal line of any rank (or a rank's exit, or a stall) the run
reports the rank and the line, collects the last lines of every rank, and
stops the ranks unless ``keep``. The lock is released whatever happens.
``detach`` returns once the ranks started (``sparktui wait`` picks it up).
The boot itself is watched by ``watch/lane.LaneWatcher`` (the console's own
watcher of the lane when the context carries one: a lane is followed once);
nothing here re-implements log parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparktui.core.config import Config
from sparktui.core.fit import fit
from sparktui.core.loadprogress import format_duration
from sparktui.core.logsig import Phase
from sparktui.core.measured import MemoryMarks, boot_figures
from sparktui.core.oom_predict import OomPredicted, load_plan
from sparktui.core.recipe import Recipe
from sparktui.core.render import LaunchPlan, RankLaunch, choose_gid, plan
from sparktui.core.state import ClusterSnapshot
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.ops import guards
from sparktui.ops.context import OpsContext
from sparktui.ops.imagesync import CHECKSUM_TIMEOUT_S, checksum_command, sync_commands
from sparktui.ops.plan import Needs, OpsState, Plan, PlannedStep
from sparktui.ops.stop_intents import StopIntents
from sparktui.ops.workflows.qualify import PREDICTED_OOM_STEP, run_gate
from sparktui.ops.workflows.runner import StepFailed, WorkflowRun
from sparktui.ops.workflows.stop import STOP_TIMEOUT_S, stop_command
from sparktui.watch.lane import LaneEvent, LaneWatcher, LinesArrived, MemoryRead, PhaseChanged
from sparktui.watch.oom import OomWatch
from sparktui.watch.readiness import Outcome, RankContainer, WaitResult
from sparktui.watch.thrash import ThrashDetector

GID_TIMEOUT_S = 15.0
START_TIMEOUT_S = 120.0
LAST_LINES = 20
LAST_LINES_TIMEOUT_S = 15.0
RM_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class ServeOptions:
    detach: bool = False
    keep: bool = False
    overrides: frozenset[guards.Override] = frozenset()
    build_node: str | None = None
    """Preferred image sync source."""
    stall_after_s: float | None = None
    first_token: bool = True
    poll_s: float = 1.0
    qualify: bool = True
    """Run the quality gate (ops/workflows/qualify.py) once the lane is ready."""


def image_syncs(config: Config, recipe: Recipe, cluster: str, snapshot: ClusterSnapshot,
                build_node: str | None) -> dict[str, guards.ImageSource]:
    """node lacking the image -> where it is synced from, and why that node."""
    out = {}
    for name in config.clusters[cluster].nodes:
        snap = snapshot.get(name)
        if snap is None or snap.probe is None or guards.has_image(snap.probe.images, recipe.image):
            continue
        source = guards.image_source(config, snapshot, recipe.image, cluster, build_node)
        if source is not None:
            out[name] = source
    return out


def plan_serve(config: Config, recipe: Recipe, cluster: str, launch: LaunchPlan,
               syncs: Mapping[str, guards.ImageSource], stale: Sequence[tuple[str, str]],
               detach: bool) -> list[PlannedStep]:
    steps = [PlannedStep("remove stale", node, f"docker rm {shlex.quote(c)}")
             for node, c in stale]
    save, load = sync_commands(recipe.image)
    for node, source in syncs.items():
        steps.append(PlannedStep("sync image", node,
                                 f"{source.node} ({source.why}): {save} | {node}: {load}; "
                                 f"then compare {checksum_command(recipe.image)} on both"))
    for r in launch.ranks:
        if r.gid_probe:
            steps.append(PlannedStep(f"gid rank {r.rank}", r.node, r.gid_probe))
    for r in launch.ranks:
        steps.append(PlannedStep(f"start rank {r.rank}", r.node,
                                 r.command(None) + ("  # + -e NCCL_IB_GID_INDEX=<detected>"
                                                    if r.gid_probe else "")))
    if not detach:
        steps.append(PlannedStep("readiness", launch.lane,
                                 "follow every rank's log; port -> /health -> /v1/models -> "
                                 "first token; stop the ranks on the first fatal line"))
    return steps


@dataclass(frozen=True)
class ServeData:
    """What the serve's run needs beyond its steps."""

    launch: LaunchPlan
    syncs: dict[str, guards.ImageSource]
    stale: tuple[tuple[str, str], ...]
    """(node, container) removed first (stale-container overridden)."""


@dataclass(frozen=True)
class Serve:
    """``serve RECIPE --cluster C``: every guard from one probe of every node (any of
    them may be an image source), the cluster's blocking switches, the host keys
    and the ports the serve binds."""

    recipe: Recipe
    cluster: str
    options: ServeOptions = ServeOptions()
    kind: str = field(default="serve", init=False)

    @property
    def target(self) -> str:
        return self.recipe.name

    def needs(self, config: Config) -> Needs:
        c = config.clusters[self.cluster]
        return Needs(nodes=tuple(config.nodes),
                     switches=tuple(config.switches[s].entity for s in c.switches),
                     fingerprints=c.nodes,
                     ports=tuple(guards.serve_ports(config, self.recipe, self.cluster)))

    def plan(self, state: OpsState) -> Plan:
        config, recipe, cluster, options = state.config, self.recipe, self.cluster, self.options
        nodes = list(config.clusters[cluster].nodes)
        report = guards.evaluate_serve(
            config, recipe, cluster, state.snapshot, switch_states=state.switch_states,
            locks=state.holders(), fingerprints=state.fingerprints, ports=state.ports,
            build_node=options.build_node, overrides=options.overrides)
        launch = plan(config, recipe, cluster)
        syncs = image_syncs(config, recipe, cluster, state.snapshot, options.build_node)
        stale = tuple((v.subject, launch.ranks[nodes.index(v.subject)].container)
                      for v in report.overridden if v.guard == "stale-container")
        steps = plan_serve(config, recipe, cluster, launch, syncs, stale, options.detach)
        detail = {"recipe": recipe.name, "cluster": cluster, "nodes": nodes,
                  "image": recipe.image, "detach": options.detach, "keep": options.keep}
        return Plan(self.kind, recipe.name, report, tuple(steps), self, nodes=tuple(nodes),
                    detail=detail, data=ServeData(launch, syncs, stale))

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        recipe, cluster, options = self.recipe, self.cluster, self.options
        data: ServeData = plan.data
        launch = data.launch
        lane = recipe.name
        run.lock(list(plan.nodes), {r.node: [r.container] for r in launch.ranks})
        for node, container in data.stale:
            await _run_ok(run, "remove stale", node, f"docker rm {shlex.quote(container)}",
                          RM_TIMEOUT_S)
        for node, source in data.syncs.items():
            await _sync(run, recipe.image, source.node, node)
        gids = {}
        for r in launch.ranks:
            gids[r.rank] = await _gid(run, r)
        started: list[RankLaunch] = []
        try:
            for r in launch.ranks:
                await _run_ok(run, f"start rank {r.rank}", r.node, r.command(gids[r.rank]),
                              START_TIMEOUT_S)
                started.append(r)
        except Exception:
            if not options.keep:
                await _stop_ranks(run, lane, started)
            raise
        if options.detach:
            run.finish(True, f"{lane}: {len(started)} rank(s) started on {cluster}; "
                             f"`sparktui wait {lane}` follows the boot",
                       {"recipe": recipe.name, "cluster": cluster, "detached": True})
            return
        await _readiness(run, recipe, cluster, launch, options)


async def _run_ok(run: WorkflowRun, step: str, node: str, cmd: str, timeout: float) -> str:
    link = run.ctx.link(node)

    async def go() -> str:
        res = await link.run(cmd, timeout)
        if res.exit_status != 0:
            out = (res.stderr or res.stdout).strip()[:400]
            raise RuntimeError(f"exit {res.exit_status}: {out}")
        return res.stdout.strip()

    return await run.step(step, node, cmd, go, describe=lambda out: out[:80] or "ok")


async def _sync(run: WorkflowRun, image: str, source: str, target: str) -> None:
    ctx = run.ctx
    save, load = sync_commands(image)

    async def go() -> dict[str, Any]:
        if ctx.pipe_image is None:
            raise RuntimeError("no image pipe in this context")
        src_sum = await _checksum(ctx, source, image)
        if not src_sum:
            raise RuntimeError(f"{image} on {source} has no sparktui.checksum label: a synced "
                               f"copy could not be verified -> rebuild it with the label")
        # the lane has no watcher (nor phase) yet: its containers start after the
        # sync, so the pull is reported as the workflow's own progress
        pulling = f"pulling image {image} to {target} from {source}"
        run.progress("sync image", target, pulling)
        last = [0]

        def progress(n: int) -> None:
            if n - last[0] >= 1 << 30:
                last[0] = n
                run.progress("sync image", target, f"{pulling}: {n / 1e9:.1f} GB")

        sent = await ctx.pipe_image(image, source, target, progress)
        dst_sum = await _checksum(ctx, target, image)
        if dst_sum != src_sum:
            raise RuntimeError(f"checksum mismatch after sync: {source} {src_sum!r}, "
                               f"{target} {dst_sum!r}")
        return {"bytes": sent, "checksum": src_sum, "source": source}

    await run.step("sync image", target, f"{source}: {save} | {target}: {load}", go,
                   describe=lambda d: f"{d['bytes']:,} bytes from {d['source']}, checksum "
                                      f"{d['checksum']} verified", detail=lambda d: d)


async def _checksum(ctx: OpsContext, node: str, image: str) -> str:
    res = await ctx.link(node).run(checksum_command(image), CHECKSUM_TIMEOUT_S)
    value = res.stdout.strip()
    return "" if res.exit_status != 0 or value in ("", "<no value>") else value


async def _gid(run: WorkflowRun, r: RankLaunch) -> int | None:
    if not r.gid_probe:
        return None
    link = run.ctx.link(r.node)

    async def go() -> int:
        res = await link.run(r.gid_probe, GID_TIMEOUT_S)
        return choose_gid(res.stdout, r.hcas)

    return await run.step(f"gid rank {r.rank}", r.node, r.gid_probe, go,
                          describe=lambda i: f"NCCL_IB_GID_INDEX={i}")


async def _stop_ranks(run: WorkflowRun, lane: str, ranks: Sequence[RankLaunch]) -> None:
    """Workers together, then the head; a rank that cannot be stopped is reported
    by its step and does not hold up the others. The lane's shared watcher is
    told first: these exits are ours, not a failure."""
    if run.ctx.lane_watchers is not None:
        run.ctx.lane_watchers.stopping(lane)

    async def stop(r: RankLaunch) -> None:
        with contextlib.suppress(StepFailed):
            await _run_ok(run, f"stop rank {r.rank}", r.node, stop_command(r.container),
                          STOP_TIMEOUT_S)

    await asyncio.gather(*(stop(r) for r in ranks if r.rank != 0))
    await asyncio.gather(*(stop(r) for r in ranks if r.rank == 0))


async def _last_lines(run: WorkflowRun, ranks: Sequence[RankLaunch]) -> dict[str, list[str]]:
    async def one(r: RankLaunch) -> list[str]:
        cmd = f"docker logs --tail {LAST_LINES} --timestamps {shlex.quote(r.container)} 2>&1"
        try:
            res = await run.ctx.link(r.node).run(cmd, LAST_LINES_TIMEOUT_S)
            return res.stdout.splitlines()[-LAST_LINES:]
        except Exception as exc:
            return [f"(could not read: {exc})"]

    lines = await asyncio.gather(*(one(r) for r in ranks))
    return {str(r.rank): ls for r, ls in zip(ranks, lines, strict=True)}


async def watch_memory(ctx: OpsContext, nodes: Sequence[str], detector: ThrashDetector,
                       interval_s: float, answering: dict[str, bool],
                       marks: tuple[MemoryMarks, Callable[[], str]] | None = None
                       ) -> ThrashVerdict:
    """Poll the lane's nodes until one of them thrashes (the Boot D signature:
    memory gone, PSI full climbing, then ping answers while SSH is starved).
    ``answering`` is kept up to date: did each node's last probe come back;
    ``marks`` (with the lane's boot phase now) gets each node's MemAvailable: the
    boot's measured milestones."""
    while True:
        snapshot = await ctx.snapshot(list(nodes))
        worst: ThrashVerdict | None = None
        for snap in snapshot.nodes:
            answering[snap.node] = snap.online
            if marks is not None and snap.probe is not None and snap.probe.meminfo is not None:
                marks[0].read(snap.node, snap.probe.meminfo.available_kib, marks[1]())
            verdict = detector.on_snapshot(snap)
            if verdict.level >= ThrashLevel.THRASH and worst is None:
                worst = verdict
        if worst is not None:
            return worst
        await ctx.clock.sleep(interval_s)


async def _watch(watch: LaneWatcher, memory: Coroutine[Any, Any, ThrashVerdict],
                 oom_stop: asyncio.Future[OomPredicted]
                 ) -> WaitResult | ThrashVerdict | OomPredicted:
    """The lane's boot and its nodes' memory side by side; the first verdict wins
    (``oom_stop`` resolves when a predicted OOM is to stop the lane)."""
    tasks: list[asyncio.Future[WaitResult | ThrashVerdict | OomPredicted]] = [
        asyncio.create_task(watch.verdict(), name=f"serve-watch-{watch.lane}"),
        asyncio.create_task(memory, name=f"serve-memory-{watch.lane}"),
        asyncio.ensure_future(oom_stop)]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        return next(iter(done)).result()
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _readiness(run: WorkflowRun, recipe: Recipe, cluster: str, launch: LaunchPlan,
                     options: ServeOptions) -> None:
    ctx = run.ctx
    lane = launch.lane
    ranks = [RankContainer(r.rank, r.node, r.container, len(launch.ranks), recipe.port,
                           recipe.engine, True) for r in launch.ranks]
    stall = (options.stall_after_s or recipe.readiness.stall_after_s
             or ctx.config.console.stall_after_s)

    def make() -> LaneWatcher:
        return LaneWatcher(lane, ranks, {r.node: ctx.link(r.node) for r in launch.ranks},
                           ctx.api_host(launch.ranks[0].node), stall_after_s=stall,
                           clock=ctx.clock, poll_s=options.poll_s,
                           first_token=options.first_token and recipe.readiness.first_token,
                           stop_intent=StopIntents(ctx.journal))

    shared = ctx.lane_watchers
    if shared is not None:
        watch = await shared.replace(lane, make)
    else:
        watch = make()
        watch.start()
    detector = ThrashDetector(ctx.config.thrash, clock=ctx.clock)
    last_phase: list[Phase | None] = [None]
    marks = MemoryMarks()

    def on_event(event: LaneEvent) -> None:
        if isinstance(event, LinesArrived):
            for ev in event.events:
                if ev is not None:
                    detector.on_event(event.node, ev)
        elif isinstance(event, PhaseChanged) and event.phase is not last_phase[0]:
            last_phase[0] = event.phase
            run.progress("readiness", lane, event.summary)

    oom_stop: asyncio.Future[OomPredicted] = asyncio.get_running_loop().create_future()

    def predicted(w: OomPredicted) -> None:
        """Warn (progress, journal); stop the lane when the recipe asks for it."""
        run.progress(PREDICTED_OOM_STEP, w.node, w.message())
        ctx.journal.append(run.wf, "note", workflow="serve", target=lane,
                           message=f"predicted OOM: {w.message()}", detail=w.to_json())
        if w.hard and recipe.readiness.stop_on_predicted_oom and not oom_stop.done():
            oom_stop.set_result(w)

    oom = OomWatch(lane, ranks, watch.tracker, load_plan(fit(ctx.config, recipe, cluster)),
                   ctx.clock, predicted)

    def on_memory(event: LaneEvent) -> None:
        if isinstance(event, MemoryRead):
            oom.on_memory(event.node, event.available_kib)

    unsubscribe = watch.subscribe(on_event)
    unsubscribe_memory = watch.subscribe(on_memory)
    nodes = [r.node for r in launch.ranks]
    answering: dict[str, bool] = {}
    memory = watch_memory(ctx, nodes, detector, ctx.config.console.poll_interval_s, answering,
                          (marks, lambda: watch.tracker.phase.value))
    try:
        result = await run.step("readiness", lane, "follow every rank's log until ready, "
                                                  "failed or stalled; watch every node for "
                                                  "thrash",
                                lambda: _watch(watch, memory, oom_stop),
                                describe=_describe_watch)
    except StepFailed:
        if not options.keep:
            await _stop_ranks(run, lane, launch.ranks)
        raise
    finally:
        unsubscribe()
        unsubscribe_memory()
        if shared is None:
            await watch.stop()
    tr = watch.tracker
    detail: dict[str, Any] = {
        "recipe": recipe.name, "cluster": cluster, "summary": tr.summary(),
        "phases": {p.value: round(s, 1) for p, s in tr.stage_seconds().items()},
        "kv_tokens": tr.kv.tokens, "kv_max_len": tr.kv.max_len,
        "kv_concurrency": tr.kv.concurrency,
        "measured": boot_figures(tr.memory_gib, tr.kv.tokens, tr.kv.max_len, marks),
        "stages": {k: round(v, 1) for k, v in watch.stages.items()},
    }
    if predictions := oom.warnings():
        detail["oom_predictions"] = [w.to_json() for _, w in sorted(predictions.items())]
    # nodes whose last probe did not answer, whatever the outcome (a boot that
    # stalled as its nodes hung), and on a thrash those whose memory is under
    # pressure too (Boot D takes every rank down together): a docker command
    # there would only hang, for STOP_TIMEOUT_S each
    hung = {n for n in nodes if not answering.get(n, True)}
    if isinstance(result, ThrashVerdict):
        hung |= {v.node for v in detector.verdicts().values() if v.level >= ThrashLevel.PRESSURE}
        detail["outcome"] = "thrash"
        detail["thrash"] = {"node": result.node, "evidence": list(result.evidence),
                            "next_step": result.next_step, "nodes": sorted(hung)}
        why = (f"{result.node} thrashes during the boot ({'; '.join(result.evidence)}) -> "
               + ", ".join(f"`sparktui recover {n}`" for n in sorted(hung)))
    elif isinstance(result, OomPredicted):
        detail["outcome"] = "predicted-oom"
        why = (f"stopped before running out of memory (readiness.stop_on_predicted_oom): "
               f"{result.message()}")
    else:
        detail["outcome"] = result.outcome.value
        if result.outcome is Outcome.READY:
            took = max(result.stages.values(), default=0.0)
            message = f"{lane} serving on {cluster} after {format_duration(took)}"
            passed = True
            if options.qualify:
                gate = await run_gate(run, lane, ctx.api_host(launch.ranks[0].node),
                                      recipe.port, recipe.qualify)
                detail["qualify"] = gate.detail()
                passed = gate.passed  # serving but unqualified is no success
                message += f"; {gate.describe()}" if passed else \
                    f", UNQUALIFIED ({gate.state.value}): {gate.describe()}"
            run.finish(passed, message, detail)
            return
        if result.failure is not None:
            f = result.failure
            detail["failure"] = f.to_json()
            why = f"failed on rank {f.rank}: {f.line}"
            if f.cause:
                why += f" (cause: {f.cause})"
        else:
            why = f"{result.outcome.value}; last progress: {result.last_progress}"
            if result.ranks:
                detail["ranks"] = {str(k): v for k, v in result.ranks.items()}
                why += f"; ranks {result.ranks_text()}"
        if result.unread:
            detail["unread"] = list(result.unread)
        if result.port_taken:
            detail["port_taken"] = result.port_taken
            why += f"; {result.port_taken}"
    reachable = [r for r in launch.ranks if r.node not in hung]
    detail["last_lines"] = await _last_lines(run, reachable)
    if options.keep:
        why += f" (ranks kept: --keep; `sparktui stop {lane}` stops them)"
    else:
        await _stop_ranks(run, lane, reachable)
        why += f" ({_stopped_where(hung, bool(reachable))})"
    run.finish(False, f"{lane}: {why}", detail)


def _stopped_where(hung: set[str], any_reachable: bool) -> str:
    """Where a failed serve stopped its ranks, and where it could not."""
    if not hung:
        return "ranks stopped"
    names = ", ".join(sorted(hung))
    if any_reachable:
        return f"ranks stopped, except on {names}: {'it does' if len(hung) == 1 else 'they do'}" \
               " not answer"
    return f"no rank stopped: {names} {'does' if len(hung) == 1 else 'do'} not answer"


def _describe_watch(result: WaitResult | ThrashVerdict | OomPredicted) -> str:
    if isinstance(result, ThrashVerdict):
        return f"thrash on {result.node}"
    if isinstance(result, OomPredicted):
        return f"predicted OOM on {result.node}: stopped"
    return result.outcome.value
