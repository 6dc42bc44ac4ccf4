"""`sparktui stop LANE`: stop every rank of a lane (workers first, the head
last), verify the memory came back, with the console's guards (protected
lanes and nodes) and its typed confirmation."""

from __future__ import annotations

import argparse

from sparktui.core.config import Config
from sparktui.ops.context import open_context
from sparktui.ops.workflows.stop import Stop

from .ops_common import add_common, drive, run_async, stderr_printer


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stop", help="stop a lane on every rank and verify memory is freed",
                       description="Stop LANE: its rank containers are stopped and removed "
                                   "(workers first, head last), then each node's MemAvailable "
                                   "must come back near its baseline. Protected lanes refuse.")
    p.add_argument("lane")
    add_common(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return run_async("stop", _main, args)


async def _main(config: Config, args: argparse.Namespace) -> int:
    async with open_context(config, emit=stderr_printer(final=args.json)) as ctx:
        return await drive(ctx, Stop(args.lane), args)
