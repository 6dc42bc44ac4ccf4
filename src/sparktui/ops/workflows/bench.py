"""A lane's bench as a workflow (``sparktui bench LANE``): prefill tokens/s,
decode tokens/s and TTFT for each depth x concurrency (the seeds' d0/d4096/d8192
x c1/c2 table), through the quality gate's engine client and its per-request
figures (core/qualify.py); every cell a journaled step. The report goes to
``recipes/<recipe>/reports/<UTC time>_bench.{json,md}``, compared with the
previous report of the recipe (core/benchrun.py flags a drop beyond the
run-to-run spread), and the headline figures (the shallowest depth at
concurrency 1) are recorded into the recipe's ``[qualify]`` through the
``record`` path, where the gate compares with them.

It reads only; each depth is a prompt the prompt-length guard checks first.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparktui.adapters.engine_http import EngineClient
from sparktui.core.benchrun import Cell, cell_of, markdown, regressions
from sparktui.core.config import Config
from sparktui.core.errors import InputError
from sparktui.core.qualify import BENCH_MAX_TOKENS, Bench
from sparktui.core.recipe_load import recipe_file
from sparktui.ops.guards import Override, evaluate
from sparktui.ops.plan import OpsState, Plan, PlannedStep
from sparktui.ops.recipe_record import record
from sparktui.ops.workflows.qualify import (
    OnServingLane,
    bench_request,
    lane_prompt_length,
    serving_lane,
)
from sparktui.ops.workflows.runner import StepFailed, WorkflowRun
from sparktui.watch.readiness import RankContainer

REQUEST_TIMEOUT_S = 600.0
"""One cell's requests: an 8K prompt at ~900 tokens/s plus the decode, with room."""
REPORT_SUFFIX = "_bench"


def cell_step(lane: str, depth: int, concurrency: int) -> PlannedStep:
    return PlannedStep(f"bench d{depth} c{concurrency}", lane,
                       f"POST /v1/chat/completions x{concurrency} at once: ~{depth:,} tokens of "
                       f"context, {BENCH_MAX_TOKENS} tokens out each")


def reports_dir(config: Config, recipe: str) -> Path:
    return recipe_file(config.recipes_dir, recipe).parent / "reports"


def previous_report(folder: Path) -> Path | None:
    """The newest ``*_bench.json`` (names sort by their UTC time)."""
    found = sorted(folder.glob(f"*{REPORT_SUFFIX}.json")) if folder.is_dir() else []
    return found[-1] if found else None


@dataclass(frozen=True)
class LaneBench(OnServingLane):
    """``sparktui bench LANE [--depths ...] [--concurrency ...]``."""

    lane: str
    depths: tuple[int, ...] = (0, 4096, 8192)
    concurrency: tuple[int, ...] = (1, 2)
    overrides: frozenset[Override] = frozenset()
    kind: str = field(default="bench", init=False)

    def plan(self, state: OpsState) -> Plan:
        _, verdicts, rank0 = serving_lane(state, self.lane)
        if self.depths[-1] > 0:
            verdicts.append(lane_prompt_length(state.config, self.lane, self.depths[-1],
                                               f"the d{self.depths[-1]} prompt"))
        steps = [cell_step(self.lane, d, c) for d in self.depths for c in self.concurrency]
        steps.append(PlannedStep("bench report", self.lane,
                                 f"write recipes/{self.lane}/reports/<UTC time>{REPORT_SUFFIX}"
                                 f".json and .md; compare with the previous report"))
        steps.append(PlannedStep("bench record", self.lane,
                                 "write [qualify] prefill_tps, decode_tps and ttft_ms (the "
                                 "shallowest depth at c1) into the recipe (comments kept)"))
        return Plan(self.kind, self.lane, evaluate(verdicts, self.overrides), tuple(steps),
                    self, detail={"lane": self.lane, "depths": list(self.depths),
                                  "concurrency": list(self.concurrency)},
                    data=rank0)

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        ctx, lane = run.ctx, self.lane
        rank0: RankContainer = plan.data
        assert rank0.port is not None  # the rank0 guard passed
        host = ctx.api_host(rank0.node)
        cells: list[Cell] = []
        async with EngineClient(host, rank0.port, timeout=10.0) as client:
            models = await client.models()
            if not models:
                run.finish(False, f"{host}:{rank0.port}/v1/models lists no model",
                           {"lane": lane, "runs": [], "report": None})
                return
            model = models[0]
            for depth in self.depths:
                for conc in self.concurrency:
                    async def measure(d: int = depth, c: int = conc) -> Cell:
                        return cell_of(d, c, await asyncio.gather(
                            *(self._one(ctx, client, model, d) for _ in range(c))))

                    step = cell_step(lane, depth, conc)
                    try:
                        cells.append(await run.step(step.step, lane, step.action, measure,
                                                    describe=Cell.describe,
                                                    detail=Cell.to_json))
                    except StepFailed as exc:
                        run.finish(False, f"{lane}: {exc.step}: {exc.message}",
                                   {"lane": lane, "runs": [c.to_json() for c in cells],
                                    "report": None})
                        return
        folder = reports_dir(ctx.config, lane)
        before = previous_report(folder)
        when = time.strftime("%Y-%m-%d_%H%M%S", time.gmtime(ctx.clock.time()))

        async def write() -> dict[str, Any]:
            return self._write(folder, before, when, cells)

        try:
            written = await run.step("bench report", lane, f"write {folder}/{when}"
                                     f"{REPORT_SUFFIX}.json and .md", write,
                                     describe=lambda w: w["json"] + (
                                         "; regressions: " + "; ".join(w["regressions"])
                                         if w["regressions"] else ""))
        except StepFailed as exc:
            run.finish(False, f"{lane}: {exc.message}",
                       {"lane": lane, "runs": [c.to_json() for c in cells], "report": None})
            return
        head = next((c for c in cells if c.concurrency == 1), cells[0])
        values: dict[str, str | int | float | bool] = {
            "qualify.prefill_tps": round(head.prefill_tps, 1),
            "qualify.ttft_ms": round(head.ttft_ms, 1)}
        if head.decode_tps is not None:
            values["qualify.decode_tps"] = round(head.decode_tps, 2)

        async def keep() -> str:
            try:
                return str(record(ctx.config, lane, values,
                                  note=f"measured by sparktui bench d{head.depth} c1 ({when})"))
            except InputError as exc:
                raise RuntimeError(str(exc.problems[0])) from None

        recorded = ""
        try:
            recorded = await run.step("bench record", lane, "write [qualify] figures", keep,
                                      describe=lambda p: f"{p}: " + ", ".join(
                                          f"{k} = {v}" for k, v in values.items()))
        except StepFailed as exc:
            recorded = f"not recorded: {exc.message}"
        flagged: list[str] = written["regressions"]
        text = (f"{lane}: " + "; ".join(c.describe() for c in cells)
                + (f"; REGRESSION vs {written['previous']}: " + "; ".join(flagged)
                   if flagged else ""))
        run.finish(not flagged, text, {"lane": lane, "runs": [c.to_json() for c in cells],
                                       "report": written["json"], "markdown": written["md"],
                                       "previous": written["previous"],
                                       "regressions": flagged, "recorded": recorded})

    async def _one(self, ctx: Any, client: EngineClient, model: str, depth: int) -> Bench:
        """The gate's bench request (engine-timed at c1; concurrent ones overlap
        in the engine's timers and are timed on the client's clock, and say so)."""
        return await bench_request(client, model, depth, timeout=REQUEST_TIMEOUT_S,
                                   clock=ctx.clock)

    def _write(self, folder: Path, before: Path | None, when: str,
               cells: list[Cell]) -> dict[str, Any]:
        previous: list[dict[str, Any]] = []
        if before is not None:
            try:
                previous = list(json.loads(before.read_text(encoding="utf-8")).get("runs", []))
            except (OSError, ValueError, AttributeError) as exc:
                raise RuntimeError(f"{before}: not a bench report ({exc})") from None
        flagged = regressions(cells, previous)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{when}{REPORT_SUFFIX}.json"
        body = {"lane": self.lane, "utc": when,
                "runs": [{**c.to_json(), "spread": {k: round(v, 4) for k, v in c.spread.items()},
                          "clock": c.clock.value} for c in cells],
                "previous": before.name if before else None, "regressions": flagged}
        path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
        md = path.with_suffix(".md")
        md.write_text(markdown(self.lane, when, cells, flagged,
                               before.name if before else ""), encoding="utf-8")
        return {"json": str(path), "md": str(md), "regressions": flagged,
                "previous": before.name if before else None}
