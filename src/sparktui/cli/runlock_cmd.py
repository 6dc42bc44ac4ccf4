"""`sparktui runlock list|close`: the per-node workflow locks; a stale one (its
owner process gone: it holds nothing) with its pid, its age and the containers
it started that still run."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from sparktui.core.config import Config
from sparktui.ops.context import open_context
from sparktui.ops.observe import observe
from sparktui.ops.plan import Needs
from sparktui.ops.runlocks import RunLocks, lock_line
from sparktui.ops.workflows.runlock_close import RunlockClose, staleness, still_running

from .ops_common import add_common, drive, run_async, stderr_printer


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runlock", help="list or close the per-node workflow locks",
                       description="One workflow per node at a time. A lock whose owner "
                                   "process is gone is reported stale: it holds nothing (the "
                                   "next workflow on its node takes it over) and may be "
                                   "closed.")
    acts = p.add_subparsers(dest="runlock_action", metavar="ACTION", required=True)
    ls = acts.add_parser("list", help="every lock, with its owner and whether it is stale")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--config", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    cl = acts.add_parser("close", help="remove a node's lock")
    cl.add_argument("node")
    cl.add_argument("--force", action="store_true",
                    help="close it even though its owner process is alive")
    add_common(cl)
    cl.add_argument("--config", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return run_async("runlock", _main, args)


async def _main(config: Config, args: argparse.Namespace) -> int:
    if not RunLocks.in_state_dir(config.state_dir()).list() and args.runlock_action == "list":
        print("[]" if args.json else "no runlock held")
        return 0
    async with open_context(config, emit=stderr_printer(final=args.json)) as ctx:
        if args.runlock_action == "close":
            return await drive(ctx, RunlockClose(args.node, args.force), args)
        locks = ctx.locks.list()
        state = await observe(ctx, Needs(nodes=tuple(sorted(
            {lock.node for lock in locks if lock.node in config.nodes}))))
        if args.json:
            print(json.dumps([{**lock.to_json(), "stale": staleness(state, lock),
                               "age_s": state.lock_ages.get(lock.node),
                               "running": still_running(state, lock)}
                              for lock in state.locks], indent=2))
            return 0
        for lock in state.locks:
            line = lock_line(lock, state.owner_alive.get(lock.node),
                             state.lock_ages.get(lock.node))
            since = time.strftime("%H:%M", time.gmtime(lock.started_at))
            print(f"{line} (since {since} UTC)")
        return 0
