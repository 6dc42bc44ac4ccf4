"""`sparktui bench LANE [--depths 0,4096,8192] [--concurrency 1,2] [--json]`:
prefill tokens/s, decode tokens/s and TTFT per depth x concurrency on a serving
lane (ops/workflows/bench.py), a report in ``recipes/<recipe>/reports/`` compared
with the previous one, the headline figures recorded into the recipe. One plan
with its guards: ``--dry-run [--json]`` prints it. Exit 0 measured with no
regression, 1 a regression or a failed request, 3 refused by a guard.

``--json`` prints exactly: runs (list of {depth, concurrency, prefill_tps,
decode_tps, ttft_ms}), report (the JSON report's path, null when none)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from ..core.benchrun import parse_ints
from ..core.config import Config
from ..ops.context import open_context
from ..ops.workflows.bench import LaneBench
from ..ops.workflows.execute import execute, prepare
from .ops_common import (
    EXIT_DECLINED,
    EXIT_FAILED,
    EXIT_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    add_prompt_override,
    confirm_overrides,
    dry_run,
    prompt_overrides,
    run_async,
    show_plan,
    stderr_printer,
)

KEYS = ("runs", "report")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="prefill/decode tokens/s and TTFT per depth x "
                                     "concurrency on a serving lane, with a report",
                       description="Send LANE BENCH requests with ~DEPTH tokens of context, "
                                   "CONCURRENCY at once, for each pair; write "
                                   "recipes/<recipe>/reports/<UTC time>_bench.{json,md}, flag "
                                   "a drop beyond the run-to-run spread against the previous "
                                   "report, and record the headline figures in the recipe's "
                                   "[qualify].")
    p.add_argument("lane")
    p.add_argument("--depths", type=_list("--depths", 0, 1_000_000), default=(0, 4096, 8192),
                   metavar="LIST", help="context tokens before the prompt (default 0,4096,8192)")
    p.add_argument("--concurrency", type=_list("--concurrency", 1, 64), default=(1, 2),
                   metavar="LIST", help="requests at once (default 1,2)")
    p.add_argument("--json", action="store_true", help="print one JSON object: runs, report")
    add_prompt_override(p)
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (every guard verdict and every step) and send nothing; "
                        "exit 0 when it would be allowed, 3 when refused")
    p.set_defaults(func=lambda args: run_async("bench", _main, args))


def _list(flag: str, lo: int, hi: int) -> Callable[[str], tuple[int, ...]]:
    def parse(text: str) -> tuple[int, ...]:
        try:
            return parse_ints(text, flag, lo, hi)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


async def _main(config: Config, args: argparse.Namespace) -> int:
    overrides = prompt_overrides("bench", args)
    if overrides is None:
        return EXIT_INPUT
    async with open_context(config, emit=stderr_printer()) as ctx:
        plan = await prepare(ctx, LaneBench(args.lane, args.depths, args.concurrency,
                                            overrides))
        if args.dry_run:
            return dry_run(plan, args.json)
        if not args.json or not plan.allowed:
            show_plan(plan)
        if plan.allowed and not confirm_overrides(plan):
            return EXIT_DECLINED
        result = await execute(ctx, plan)
    refused = result.report is not None and not result.report.allowed
    if args.json:
        json.dump({"runs": result.detail.get("runs", []),
                   "report": result.detail.get("report")}, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(result.message)
        if result.detail.get("report"):
            print(f"report: {result.detail['report']}")
    if result.ok:
        return EXIT_OK
    return EXIT_REFUSED if refused else EXIT_FAILED
