"""`sparktui power cycle|on|off NODE`, `power cluster on|off CLUSTER`,
`power resume [WF] [--close REASON]`: node plugs through Home Assistant,
with the same guards and confirmations as the console."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sparktui.core.config import Config, PowerConfig
from sparktui.core.tomlschema import flag
from sparktui.ops.confirm import confirmation_for
from sparktui.ops.context import OpsContext, open_context
from sparktui.ops.resume import close, offers
from sparktui.ops.workflows.cluster_power import ClusterPower
from sparktui.ops.workflows.power import PowerCycle, PowerSwitch
from sparktui.ops.workflows.power_resume import Resume

from .ops_common import (
    EXIT_DECLINED,
    EXIT_INPUT,
    add_common,
    confirm,
    drive,
    run_async,
    stderr_printer,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("power", help="power a node or a cluster through Home Assistant",
                       description="Switch node plugs through Home Assistant. Every change is "
                                   "confirmed by re-reading the plug; protected nodes and "
                                   "shared switches are never toggled by a node action.")
    acts = p.add_subparsers(dest="power_action", metavar="ACTION", required=True)
    for name, text in (("cycle", "systemctl poweroff over SSH and wait until dark (a starved or "
                                 "unreachable node: at once), then plug off, wait, plug on, "
                                 "wait for the node, re-check"),
                       ("on", "plug on, wait for the node, re-check"),
                       ("off", "systemctl poweroff over SSH, wait until dark, then plug off "
                               "(a starved or unreachable node: plug off at once)")):
        a = acts.add_parser(name, help=text, description=text)
        a.add_argument("node")
        if name == "cycle":
            a.add_argument("--off-seconds", default=None,
                           type=flag(PowerConfig, "off_seconds"),
                           help="how long the plug stays off (default: [power] off_seconds)")
        if name in ("off", "cycle"):
            a.add_argument("--hard", action="store_true",
                           help="cut the plug at once, without systemctl poweroff")
        _common(a)
    c = acts.add_parser("cluster", help="power a cluster on (switch first) or off (switch "
                                        "last); protected nodes skipped")
    c.add_argument("state", choices=("on", "off"))
    c.add_argument("cluster")
    c.add_argument("--hard", action="store_true",
                   help="off: cut every plug at once (default: nodes that answer SSH are "
                        "shut down with systemctl poweroff first)")
    _common(c)
    r = acts.add_parser("resume", help="list unfinished workflows, or complete/close one")
    r.add_argument("wf", nargs="?", help="workflow id (from the list)")
    r.add_argument("--close", metavar="REASON", help="mark it ended instead of completing it")
    _common(r)
    p.set_defaults(func=run)


def _common(a: argparse.ArgumentParser) -> None:
    add_common(a)
    a.add_argument("--config", type=Path, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    return run_async("power", _main, args)


async def _main(config: Config, args: argparse.Namespace) -> int:
    async with open_context(config, emit=stderr_printer(final=args.json)) as ctx:
        if args.power_action == "resume":
            return await _resume(ctx, args)
        if args.power_action == "cluster":
            if args.cluster not in config.clusters:
                print(f"sparktui power: unknown cluster {args.cluster!r} (known: "
                      f"{', '.join(config.clusters)})", file=sys.stderr)
                return EXIT_INPUT
            return await drive(ctx, ClusterPower(args.cluster, args.state == "on",
                                                 hard=args.hard), args)
        node = args.node
        if node not in config.nodes:
            print(f"sparktui power: unknown node {node!r} (known: {', '.join(config.nodes)})",
                  file=sys.stderr)
            return EXIT_INPUT
        if args.power_action == "cycle":
            return await drive(ctx, PowerCycle(node, args.off_seconds, hard=args.hard), args)
        return await drive(ctx, PowerSwitch(node, args.power_action == "on",
                                            hard=getattr(args, "hard", False)), args)


async def _resume(ctx: OpsContext, args: argparse.Namespace) -> int:
    found = {o.record.wf: o for o in offers(ctx.journal, ctx)}
    if args.wf is None:
        if args.json:
            print(json.dumps([{"wf": o.record.wf, "workflow": o.record.workflow,
                               "target": o.record.target, "what": o.what, "action": o.action}
                              for o in found.values()], indent=2))
        elif not found:
            print("no unfinished workflow")
        for o in ([] if args.json else found.values()):
            print(f"{o.record.wf}: {o.what}")
            print(f"  {'to complete: ' + o.action if o.action else 'close it with --close'}")
        return 0
    if args.close:
        offer = found.get(args.wf)
        if offer is None:
            print(f"sparktui power resume: no unfinished workflow {args.wf!r}", file=sys.stderr)
            return EXIT_INPUT
        if not confirm(confirmation_for("resume", args.wf), yes=args.yes):
            return EXIT_DECLINED
        freed = close(ctx, offer.record, args.close)
        print(f"{args.wf}: closed ({args.close}); unlocked: {', '.join(freed) or 'nothing'}")
        return 0
    return await drive(ctx, Resume(args.wf), args)
