"""The long-prompt ladder as a workflow (``sparktui envelope LANE``): the seeds'
rule "long prompts are tested in increasing order (8K -> 32K -> 64K -> 128K)"
with the guards the 22:45 incident asked for.

Each rung is a real prompt of that many tokens through the lane's API (the
quality gate's engine client). While it runs, MemAvailable and memory PSI are
read at >= 2 Hz on every rank's node through that node's long-lived reader
shell (shell builtins only: no process is forked per sample), and fed to the
thrash rules (core/thrash.py): the first thrash-risk sign (thrash suspected or
worse, or a node whose shell stops answering) ends the ladder at once, the
prompt cancelled. Before each rung after the first, its scratch is predicted
from the rungs so far (core/envelope.py) and the rung is refused when the
prediction leaves less than the recipe's ``[fit] prefill_reserve_gib``. At the end
the fit ``scratch ≈ a + b·N`` is written to the recipe's ``[fit]
prefill_scratch_*`` through the ``record`` path, and the ceiling is reported.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sparktui.adapters.engine_http import EngineClient
from sparktui.core.clock import within
from sparktui.core.envelope import (
    DEFAULT_RUNGS,
    Rung,
    check_rung,
    fit_scratch,
    rung_scratch,
)
from sparktui.core.errors import InputError
from sparktui.core.probe import parse_probe, probe_script
from sparktui.core.qualify import bench_prompt
from sparktui.core.recipe_load import load_recipe
from sparktui.core.thrash import NodeSample, ThrashLevel, ThrashRules
from sparktui.ops.guards import Override, evaluate
from sparktui.ops.plan import OpsState, Plan, PlannedStep
from sparktui.ops.recipe_record import record
from sparktui.ops.workflows.qualify import (
    PROMPT_SLACK,
    OnServingLane,
    lane_prompt_length,
    recipe_ceiling,
    recipe_window,
    serving_lane,
)
from sparktui.ops.workflows.runner import StepFailed, WorkflowRun
from sparktui.watch.readiness import RankContainer

SAMPLE_INTERVAL_S = 0.4
"""2.5 Hz: the issue asks for >= 2 Hz during each prefill."""
MIN_SAMPLES = 2
"""A prefill sampled fewer times (shorter than ~0.8 s) measures nothing."""
SAMPLE_TIMEOUT_S = 3.0
"""A reader shell that does not answer within this is a thrash-risk sign."""
RUNG_MAX_TOKENS = 16
"""Tokens generated after each prompt: the prefill is what is measured."""
PREFILL_TOKENS_PER_S_FLOOR = 200.0
"""The slowest prefill allowed for when bounding a rung's request."""
SECTIONS = ("meminfo", "psi")


def rung_depth(tokens: int, window: int | None) -> int:
    """The context sent for a rung of ``tokens`` on a lane of this ``window``: a
    rung longer than the window admits is sent at the window's limit (the 128K
    rung on a 131072 window, `PROMPT_SLACK` kept free); its ``tokens`` are the
    engine's count."""
    if window is None:
        return tokens
    return max(1, min(tokens, window - RUNG_MAX_TOKENS - PROMPT_SLACK))


def _k(tokens: int) -> str:
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else f"{tokens:,}"


def rung_step(lane: str, tokens: int, nodes: Sequence[str],
              window: int | None = None) -> PlannedStep:
    depth = rung_depth(tokens, window)
    within = f" ({depth:,} within the {window:,}-token window)" if depth < tokens and window \
        else ""
    return PlannedStep(f"envelope rung {_k(tokens)}", lane,
                       f"POST /v1/chat/completions: a {tokens:,}-token prompt{within}, "
                       f"{RUNG_MAX_TOKENS} tokens out; MemAvailable/PSI at "
                       f"{1 / SAMPLE_INTERVAL_S:g} Hz on {', '.join(nodes)}")


def record_step(lane: str) -> PlannedStep:
    return PlannedStep("envelope record", lane,
                       f"write [fit] prefill_scratch_base_gib, prefill_scratch_gib_per_token "
                       f"and prefill_ceiling_tokens into recipes/{lane}/recipe.toml "
                       f"(comments kept)")


@dataclass
class _Sampler:
    """The samples of one rung: the lowest MemAvailable per node and the thrash rules."""

    ctx: Any
    nodes: dict[str, Any]
    """node name -> NodeConfig."""
    rules: dict[str, ThrashRules]
    low_kib: dict[str, int] = field(default_factory=dict)
    risk: str = ""
    samples: int = 0
    active: bool = False
    """A rung's prompt is in flight: only the samples taken meanwhile count."""
    in_window: int = 0

    async def once(self) -> dict[str, int]:
        """One sample of every node; returns MemAvailable KiB per node that answered."""
        clock = self.ctx.clock

        async def one(name: str) -> tuple[str, int | None]:
            script = probe_script(self.nodes[name], SECTIONS)
            try:
                result = await within(clock, SAMPLE_TIMEOUT_S,
                                      self.ctx.link(name).read(script, SAMPLE_TIMEOUT_S))
            except TimeoutError:
                self.rules[name].add_sample(NodeSample(clock.monotonic(), probe_ok=False))
                self.risk = self.risk or (f"{name}: its shell did not answer a memory read "
                                          f"within {SAMPLE_TIMEOUT_S:g} s")
                return name, None
            except Exception as exc:
                self.rules[name].add_sample(NodeSample(clock.monotonic(), probe_ok=False))
                self.risk = self.risk or f"{name}: memory sample failed ({exc})"
                return name, None
            probe = parse_probe(result.stdout, SECTIONS)
            mem, psi = probe.meminfo, probe.psi
            self.rules[name].add_sample(NodeSample(
                clock.monotonic(), probe_ok=True,
                psi_some_avg10=psi.some.avg10 if psi else None,
                psi_full_avg10=psi.full.avg10 if psi and psi.full else None,
                psi_full_total_us=psi.full.total_us if psi and psi.full else None,
                mem_available_kib=mem.available_kib if mem else None,
                mem_total_kib=mem.total_kib if mem else None, uptime_s=probe.uptime_s))
            return name, mem.available_kib if mem else None

        got = await asyncio.gather(*(one(n) for n in self.nodes))
        self.samples += 1
        out = {n: kib for n, kib in got if kib is not None}
        if self.active:
            self.in_window += 1
            for n, kib in out.items():
                self.low_kib[n] = min(kib, self.low_kib.get(n, kib))
        now = clock.monotonic()
        for n, rules in self.rules.items():
            verdict = rules.verdict(now)
            if verdict.level >= ThrashLevel.SUSPECTED and not self.risk:
                self.risk = (f"{n}: {verdict.level.label}: " + "; ".join(verdict.evidence[:3]))
        return out

    async def loop(self) -> None:
        """Sample every SAMPLE_INTERVAL_S from the start of the last round (a slow
        round does not stretch the interval) until a thrash-risk sign."""
        clock = self.ctx.clock
        while True:
            started = clock.monotonic()
            await self.once()
            if self.risk:
                return
            await clock.sleep(max(0.0, SAMPLE_INTERVAL_S - (clock.monotonic() - started)))


@dataclass(frozen=True)
class Envelope(OnServingLane):
    """``sparktui envelope LANE [--rungs ...]`` (and the console's envelope action)."""

    lane: str
    rungs: tuple[int, ...] = DEFAULT_RUNGS
    overrides: frozenset[Override] = frozenset()
    kind: str = field(default="envelope", init=False)

    def plan(self, state: OpsState) -> Plan:
        ranks, verdicts, rank0 = serving_lane(state, self.lane)
        ceiling = recipe_ceiling(state.config, self.lane)
        # measured: no rung beyond the ceiling; unmeasured: the ladder starts low
        # (each later rung is then checked on the prediction, before it is sent)
        tokens = self.rungs[-1] if ceiling is not None else self.rungs[0]
        verdicts.append(lane_prompt_length(state.config, self.lane, tokens,
                                           "the last rung" if ceiling is not None else
                                           "the first rung"))
        report = evaluate(verdicts, self.overrides)
        nodes = tuple(sorted({r.node for r in ranks}))
        window = recipe_window(state.config, self.lane)
        steps = [rung_step(self.lane, t, nodes, window) for t in self.rungs] + [
            record_step(self.lane)]
        return Plan(self.kind, self.lane, report, tuple(steps), self, nodes=nodes,
                    detail={"lane": self.lane, "rungs": list(self.rungs),
                            "rank0": f"{rank0.node}:{rank0.port}" if rank0 else ""},
                    data=(rank0, nodes, window))

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        ctx, lane = run.ctx, self.lane
        rank0: RankContainer
        rank0, nodes, window = plan.data
        assert rank0.port is not None  # the rank0 guard passed
        try:
            reserve = load_recipe(ctx.config, lane).fit.prefill_reserve_gib
        except InputError as exc:
            run.finish(False, f"recipe {lane!r} not loaded: {exc.problems[0]}",
                       self._detail([], "recipe not loaded", 0.0, {}))
            return
        sampler = _Sampler(ctx, {n: ctx.config.nodes[n] for n in nodes},
                           {n: ThrashRules(n, ctx.config.thrash) for n in nodes})
        done: list[Rung] = []
        stopped = "completed"
        failed = False  # a rung failed or was aborted (a refusal is the ladder working)
        host = ctx.api_host(rank0.node)
        async with EngineClient(host, rank0.port, timeout=10.0) as client:
            models = await client.models()
            if not models:
                run.finish(False, f"{host}:{rank0.port}/v1/models lists no model",
                           self._detail(done, "no model", reserve, {}))
                return
            model = models[0]
            before: dict[str, int] = {}
            for tokens in self.rungs:
                before = await sampler.once()
                if sampler.risk:
                    stopped, failed = f"thrash risk before {_k(tokens)}: {sampler.risk}", True
                    break
                if set(before) != set(nodes):
                    stopped = f"not every rank's node answered before {_k(tokens)}"
                    failed = True
                    break
                room = min(before.values()) / 1024 / 1024
                check = check_rung(tokens, done, room, reserve)
                run.progress("envelope", lane, check.message)
                if not check.ok:
                    stopped = check.message
                    break
                step = rung_step(lane, tokens, nodes, window)

                async def climb(t: int = rung_depth(tokens, window),
                                b: dict[str, int] = before) -> Rung:
                    return await self._rung(ctx, client, model, sampler, t, b)

                try:
                    rung = await run.step(step.step, lane, step.action, climb,
                                          describe=Rung.describe, detail=Rung.to_json)
                except StepFailed as exc:
                    stopped, failed = exc.message, True
                    break
                done.append(rung)
        fit = fit_scratch(done)
        room = min(before.values()) / 1024 / 1024 if before else 0.0
        recorded: dict[str, object] = {}
        measured = [r for r in done if r.ok]
        if fit is not None and len(measured) >= 2 and fit.b_gib_per_token <= 0 and not failed:
            stopped = (f"{stopped}; the scratch did not grow with the prompt "
                       f"({fit.describe()}): nothing recorded, try longer rungs")
            failed = True
        if fit is not None and len(measured) >= 2 and not failed:
            values: dict[str, str | int | float | bool] = {
                "fit.prefill_scratch_base_gib": round(max(0.0, fit.a_gib), 3),
                "fit.prefill_scratch_gib_per_token": float(f"{fit.b_gib_per_token:.4g}"),
                "fit.prefill_ceiling_tokens": max(1, fit.ceiling(room, reserve))}
            step = record_step(lane)
            note = f"measured by sparktui envelope ({len(done)} rungs)"

            async def write() -> str:
                try:
                    return str(record(ctx.config, lane, values, note=note))
                except InputError as exc:
                    raise RuntimeError(str(exc.problems[0])) from None

            try:
                path = await run.step(step.step, lane, step.action, write,
                                      describe=lambda p: f"{p}: " + ", ".join(
                                          f"{k} = {v}" for k, v in values.items()))
                recorded = {"file": path, **values}
            except StepFailed as exc:
                recorded = {"error": exc.message}
        detail = self._detail(done, stopped, reserve, recorded, fit=fit, room=room)
        ceiling = detail["ceiling_tokens"]
        text = (f"{lane}: {len(done)} rung(s)"
                + (f"; {fit.describe()}; longest safe prompt: {ceiling:,} tokens"
                   if fit is not None and ceiling is not None else "")
                + f"; stopped: {stopped}")
        run.finish(not failed and "file" in recorded, text, detail)

    async def _rung(self, ctx: Any, client: EngineClient, model: str, sampler: _Sampler,
                    tokens: int, before: dict[str, int]) -> Rung:
        sampler.low_kib.clear()
        sampler.in_window = 0
        t0 = ctx.clock.monotonic()
        sampler.active = True
        timeout = tokens / PREFILL_TOKENS_PER_S_FLOOR + 120.0
        ask = asyncio.ensure_future(client.chat(model, bench_prompt(tokens),
                                                max_tokens=RUNG_MAX_TOKENS, timeout=timeout,
                                                clock=ctx.clock.monotonic, fixed_length=True))
        watch = asyncio.ensure_future(sampler.loop())
        try:
            await asyncio.wait({ask, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sampler.active = False
            for task in (ask, watch):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        if sampler.risk:
            raise RuntimeError(f"aborted at the first thrash-risk sign: {sampler.risk}")
        answer = ask.result()
        if answer.error:
            raise RuntimeError(answer.error)
        took, samples = ctx.clock.monotonic() - t0, sampler.in_window
        prefill_s = answer.ttft_s if answer.ttft_s is not None else took
        if samples < MIN_SAMPLES or prefill_s < MIN_SAMPLES * SAMPLE_INTERVAL_S:
            # too short to be seen: not a measurement (the fit skips it)
            return Rung(answer.prompt_tokens or tokens, 0.0, 0.0, False, samples, took)
        low, scratch = rung_scratch(before, sampler.low_kib)
        return Rung(answer.prompt_tokens or tokens, low, scratch, True, samples, took)

    def _detail(self, done: Sequence[Rung], stopped: str, reserve: float,
                recorded: dict[str, object], *, fit: Any = None,
                room: float = 0.0) -> dict[str, Any]:
        ceiling = fit.ceiling(room, reserve) if fit is not None and recorded.get("file") \
            else None
        return {"lane": self.lane, "envelope": {
            "rungs": [r.to_json() for r in done],
            "scratch_fit": fit.to_json() if fit is not None else None,
            "ceiling_tokens": ceiling,
            "stopped_because": stopped,
            "reserve_gib": reserve, "available_before_gib": round(room, 3),
            "recorded": recorded}, "ceiling_tokens": ceiling}
