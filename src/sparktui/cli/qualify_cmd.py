"""`sparktui qualify LANE [--json] [--depth N]`: the post-boot quality gate on a
serving lane (copy fidelity in two scripts, identifier echo, smoke bench),
journaled; one plan with its guards (the lane exists and serves), as every
workflow: ``--dry-run [--json]`` prints it. Exit 0 qualified, 1 garbled, slow
or the gate could not run, 3 refused by a guard.

``--json`` prints exactly: lane, state, cer, identifiers_ok,
identifiers_total, ttft_ms, decode_tps, prefill_tps."""

from __future__ import annotations

import argparse
import json
import sys

from ..core.config import Config
from ..ops.workflows.qualify import Qualify
from ..ops.workflows.runner import WorkflowResult
from .ops_common import add_prompt_override, drive_lane, run_async

KEYS = ("lane", "state", "cer", "identifiers_ok", "identifiers_total", "ttft_ms", "decode_tps",
        "prefill_tps")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("qualify", help="quality gate on a serving lane: copy, identifiers, bench",
                       description="Ask LANE (temperature 0) to copy ~300-word Russian and "
                                   "English passages verbatim and to echo six identifiers as "
                                   "JSON, then measure TTFT, decode and prefill tokens/s at "
                                   "concurrency 1. Garbled above the recipe's qualify.max_cer "
                                   "or with an identifier changed; slow below "
                                   "qualify.decode_tps_min. Nothing is stopped.")
    p.add_argument("lane")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: lane, state, cer, identifiers_ok, "
                        "identifiers_total, ttft_ms, decode_tps, prefill_tps")
    p.add_argument("--depth", type=_depth, default=0, metavar="N",
                   help="bench with ~N tokens of context before the prompt (default 0)")
    add_prompt_override(p)
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (every guard verdict and every step) and ask nothing; "
                        "exit 0 when it would be allowed, 3 when refused")
    p.set_defaults(func=lambda args: run_async("qualify", _main, args))


def _depth(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a token count: {text!r}") from None
    if not 0 <= value <= 1_000_000:
        raise argparse.ArgumentTypeError("--depth must be between 0 and 1000000 tokens")
    return value


async def _main(config: Config, args: argparse.Namespace) -> int:
    """The one route (`drive_lane`); the gate changes nothing, so nothing is
    confirmed but an overridden refusal."""
    return await drive_lane(config, "qualify", args,
                            lambda overrides: Qualify(args.lane, args.depth, overrides),
                            lambda result: _show(result, args.lane, args.json))


def _show(result: WorkflowResult, lane: str, as_json: bool) -> None:
    gate = result.detail.get("qualify") or {"lane": lane, "state": "failed"}
    if as_json:
        json.dump({k: gate.get(k) for k in KEYS}, sys.stdout)
        sys.stdout.write("\n")
        return
    print(result.message)
    for reason in gate.get("reasons", []):
        print(f"  {reason}")
    if gate.get("comparison"):
        print(f"  {gate['comparison']}")
