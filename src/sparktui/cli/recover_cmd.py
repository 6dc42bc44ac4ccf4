"""`sparktui recover NODE`: the runbook for a node that stopped answering SSH —
3 short SSH retries ~30 s apart, then a plug cycle of that node only, then a
re-check. Never toggles a protected node or a shared switch."""

from __future__ import annotations

import argparse
import sys

from sparktui.core.config import Config, PowerConfig
from sparktui.core.tomlschema import flag
from sparktui.ops.context import open_context
from sparktui.ops.workflows.recover import Recover

from .ops_common import EXIT_INPUT, add_common, drive, run_async, stderr_printer


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("recover", help="SSH retries, then a plug cycle of one node",
                       description="Recover NODE: [thrash] ssh_retries SSH attempts "
                                   "ssh_retry_interval_s apart; if none answers, power-cycle "
                                   "that node only through Home Assistant and re-check it.")
    p.add_argument("node")
    p.add_argument("--off-seconds", default=None,
                   type=flag(PowerConfig, "off_seconds"),
                   help="how long the plug stays off (default: [power] off_seconds)")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return run_async("recover", _main, args)


async def _main(config: Config, args: argparse.Namespace) -> int:
    if args.node not in config.nodes:
        print(f"sparktui recover: unknown node {args.node!r} (known: "
              f"{', '.join(config.nodes)})", file=sys.stderr)
        return EXIT_INPUT
    async with open_context(config, emit=stderr_printer(final=args.json)) as ctx:
        return await drive(ctx, Recover(args.node, args.off_seconds), args)
