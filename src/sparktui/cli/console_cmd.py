"""`sparktui console` (and `sparktui` with no command): the Textual console.

It reaches the nodes through the config: with `[simulator] enabled = true`
through the running simulator's endpoints file (`sparktui sim`, or use
`sparktui demo`, which starts both). With a `sparktui sentinel` running on
the same state directory, the console attaches to it (its events, its
history of the night) instead of polling the nodes a second time; if the
sentinel goes, the console polls alone and attaches again once it is back.
"""

from __future__ import annotations

import argparse
import sys

from ..adapters.endpoints import EndpointError, resolve_endpoints
from ..service.attach import socket_path
from ..service.cluster import ClusterService
from ..tui.app import make_app
from ..tui.logsink import logged_to_file
from .common import load
from .crash import DEBUG_LOG


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("console", help="open the console (the default command)",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--read-only", action="store_true",
                   help="for observers: no action keys, no action commands")
    p.add_argument("--attached-only", action="store_true",
                   help="only ever attached to the sentinel, never polling the nodes "
                        "itself, not even while it restarts: its last state is shown stale "
                        "(none when it was away at the start, said so) until it is back "
                        "(each `sparktui web` session)")
    p.set_defaults(func=run, read_only=False)


def run(args: argparse.Namespace) -> int:
    config = load(args)
    try:
        endpoints = resolve_endpoints(config)
    except EndpointError as exc:
        print(f"sparktui: {exc}", file=sys.stderr)
        if config.simulator.enabled:
            print("sparktui: the config points at the simulator: start it with `sparktui sim`, "
                  "or run `sparktui demo` (simulator and console together)", file=sys.stderr)
        return 2
    service = ClusterService(config, endpoints=endpoints,
                             sentinel=socket_path(config.state_dir()),
                             attached_only=args.attached_only)
    # what the service logs while the console runs and shuts down (a node or
    # Home Assistant gone at quit) goes to the debug log, never over the shell
    with logged_to_file(config.state_dir() / DEBUG_LOG) as logged:
        make_app(config, service=service, read_only=args.read_only, tune_gc=True).run()
    if said := logged.summary("sparktui"):
        print(said, file=sys.stderr)
    return 0
