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

from ..core.config import Config
from ..ops.workflows.bench import LaneBench
from ..ops.workflows.runner import WorkflowResult
from .ops_common import add_prompt_override, count_list, drive_lane, run_async

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
    p.add_argument("--depths", type=count_list("--depths", 0, 1_000_000), default=(0, 4096, 8192),
                   metavar="LIST", help="context tokens before the prompt (default 0,4096,8192)")
    p.add_argument("--concurrency", type=count_list("--concurrency", 1, 64), default=(1, 2),
                   metavar="LIST", help="requests at once (default 1,2)")
    p.add_argument("--json", action="store_true", help="print one JSON object: runs, report")
    add_prompt_override(p)
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (every guard verdict and every step) and send nothing; "
                        "exit 0 when it would be allowed, 3 when refused")
    p.set_defaults(func=lambda args: run_async("bench", _main, args))


async def _main(config: Config, args: argparse.Namespace) -> int:
    return await drive_lane(config, "bench", args,
                            lambda overrides: LaneBench(args.lane, args.depths,
                                                        args.concurrency, overrides),
                            lambda result: _show(result, args.json))


def _show(result: WorkflowResult, as_json: bool) -> None:
    if as_json:
        json.dump({"runs": result.detail.get("runs", []),
                   "report": result.detail.get("report")}, sys.stdout)
        sys.stdout.write("\n")
        return
    print(result.message)
    if result.detail.get("report"):
        print(f"report: {result.detail['report']}")
