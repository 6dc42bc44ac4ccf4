"""`sparktui envelope LANE [--rungs 8K,32K,64K,128K] [--json]`: the long-prompt
ladder on a serving lane (ops/workflows/envelope.py): rungs in increasing
order, host memory sampled on every rank's node during each prefill, the next
rung refused when its predicted scratch leaves less than the recipe's reserve,
the first thrash-risk sign ending it; the fit ``scratch ≈ a + b·N`` written to
the recipe's ``[fit]``. One plan with its guards, as every workflow:
``--dry-run [--json]`` prints it. Exit 0 when at least two rungs were measured
and recorded, 1 otherwise, 3 refused by a guard.

``--json`` prints exactly: rungs (list of {tokens, low_water_gib, scratch_gib,
ok}), scratch_fit ({a_gib, b_gib_per_token, residual_gib}), ceiling_tokens,
stopped_because."""

from __future__ import annotations

import argparse
import json
import sys

from ..core.config import Config
from ..core.envelope import DEFAULT_RUNGS, MAX_RUNG_TOKENS
from ..ops.workflows.envelope import Envelope
from ..ops.workflows.runner import WorkflowResult
from .ops_common import add_prompt_override, count_list, drive_lane, run_async

KEYS = ("rungs", "scratch_fit", "ceiling_tokens", "stopped_because")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("envelope", help="long-prompt ladder on a serving lane: prefill "
                                        "scratch a + b*N and the longest safe prompt",
                       description="Send LANE prompts of increasing length (default 8K, 32K, "
                                   "64K, 128K; K = 1024 tokens) while sampling MemAvailable and "
                                   "memory PSI on every rank's node; refuse a rung whose "
                                   "predicted scratch leaves less than the recipe's "
                                   "[fit] prefill_reserve_gib; stop at the first thrash-risk "
                                   "sign; write [fit] prefill_scratch_* into the recipe.")
    p.add_argument("lane")
    p.add_argument("--rungs", type=count_list("--rungs", 1, MAX_RUNG_TOKENS),
                   default=DEFAULT_RUNGS, metavar="LIST",
                   help="strictly increasing token counts, e.g. 8K,32K,64K,128K")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: rungs, scratch_fit, ceiling_tokens, "
                        "stopped_because")
    add_prompt_override(p)
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (every guard verdict and every step) and send nothing; "
                        "exit 0 when it would be allowed, 3 when refused")
    p.set_defaults(func=lambda args: run_async("envelope", _main, args))


async def _main(config: Config, args: argparse.Namespace) -> int:
    return await drive_lane(config, "envelope", args,
                            lambda overrides: Envelope(args.lane, args.rungs, overrides),
                            lambda result: _show(result, args.json))


def _show(result: WorkflowResult, as_json: bool) -> None:
    env = result.detail.get("envelope") or {"rungs": [], "scratch_fit": None,
                                            "ceiling_tokens": None,
                                            "stopped_because": result.message}
    if as_json:
        json.dump({k: env.get(k) for k in KEYS}, sys.stdout)
        sys.stdout.write("\n")
        return
    for r in env.get("rungs", []):
        print(f"  {r['tokens']:>8,} tokens: scratch {r['scratch_gib']:.2f} GiB, "
              f"low water {r['low_water_gib']:.2f} GiB")
    print(result.message)
    if env.get("ceiling_tokens") is not None:
        print(f"longest safe prompt: {env['ceiling_tokens']:,} tokens")
