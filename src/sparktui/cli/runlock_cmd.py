"""`sparktui runlock list|close`: the per-node workflow locks, with stale
detection (owner process gone and none of its containers running)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from sparktui.core.config import Config
from sparktui.core.errors import RemoteError
from sparktui.core.probe import parse_probe
from sparktui.ops.confirm import confirmation_for
from sparktui.ops.context import OpsContext, open_context
from sparktui.ops.resume import close
from sparktui.ops.runlocks import RunLock, RunLocks, is_stale, owner_alive
from sparktui.ops.workflows.power import plugs_left_off
from sparktui.watch.readiness import DOCKER_PS

from .ops_common import EXIT_DECLINED, EXIT_FAILED, EXIT_INPUT, add_common, confirm, run_async


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runlock", help="list or close the per-node workflow locks",
                       description="One workflow per node at a time. A lock whose owner "
                                   "process is gone and whose containers no longer run is "
                                   "reported stale and may be closed.")
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


async def running_containers(ctx: OpsContext, node: str) -> set[str] | None:
    """Names of the containers running on ``node``; None when it does not answer."""
    try:
        res = await ctx.link(node).run(f"{DOCKER_PS} 2>&1", 15.0)
    except RemoteError:
        return None
    probe = parse_probe(f"@@containers\n{res.stdout}\n@@rc 0\n@@end\n")
    return {c.name for c in probe.containers if c.running}


async def staleness(ctx: OpsContext | None, lock: RunLock) -> bool | None:
    alive = owner_alive(lock)
    if alive is False and lock.containers and ctx is not None and lock.node in ctx.config.nodes:
        return is_stale(lock, alive, await running_containers(ctx, lock.node))
    return is_stale(lock, alive, None)


async def _main(config: Config, args: argparse.Namespace) -> int:
    locks = RunLocks.in_state_dir(config.state_dir())
    if not locks.list() and args.runlock_action == "list":
        print("[]" if args.json else "no runlock held")
        return 0
    async with open_context(config) as ctx:
        if args.runlock_action == "list":
            rows = []
            for lock in locks.list():
                stale = await staleness(ctx, lock)
                rows.append({**lock.to_json(), "stale": stale})
            if args.json:
                print(json.dumps(rows, indent=2))
            for r in ([] if args.json else rows):
                state = {True: "STALE", False: "held", None: "unknown"}[r["stale"]]
                since = time.strftime("%H:%M", time.gmtime(float(r["started_at"])))
                print(f"{r['node']}: {state}: {r['workflow']} {r['target']} ({r['wf']}, pid "
                      f"{r['pid']} on {r['host']}, since {since} UTC)")
            return 0
        lock = locks.get(args.node)
        if lock is None:
            print(f"sparktui runlock: {args.node} is not locked", file=sys.stderr)
            return EXIT_INPUT
        stale = await staleness(ctx, lock)
        if stale is not True and not args.force:
            print(f"sparktui runlock: {args.node} is held by {lock.describe()} and is not "
                  f"known to be stale ({'owner alive' if stale is False else 'unknown'}); "
                  f"pass --force to close it anyway", file=sys.stderr)
            return EXIT_FAILED
        if not confirm(confirmation_for("runlock-close", args.node), yes=args.yes):
            return EXIT_DECLINED
        locks.close(args.node)
        ctx.journal.append(lock.wf, "note", workflow=lock.workflow, target=lock.target,
                           message=f"runlock on {args.node} closed by the operator "
                                   f"({'stale' if stale else 'forced'})")
        print(f"{args.node}: lock of {lock.describe()} closed")
        _close_its_workflow(ctx, lock)
        return 0


def _close_its_workflow(ctx: OpsContext, lock: RunLock) -> None:
    """The crashed workflow that left the lock is closed with it, unless it left a
    plug off (then it stays offered: `sparktui power resume`)."""
    record = next((w for w in ctx.journal.unfinished() if w.wf == lock.wf), None)
    if record is None or any(w.wf == lock.wf for w in ctx.locks.list()):
        return
    if plugs_left_off(record, ctx.config):
        print(f"{lock.wf} left a plug off: complete it with `sparktui power resume {lock.wf}`")
        return
    close(ctx, record, f"its runlock on {lock.node} was closed")
    print(f"{lock.wf}: unfinished {record.workflow} {record.target} closed with its lock")
