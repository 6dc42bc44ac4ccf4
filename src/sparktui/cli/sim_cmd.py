"""`sparktui sim`: run the simulated cluster alone until interrupted.

The first stdout line is the endpoints JSON (docs/CONTRACTS.md); human lines
follow. Other `sparktui` commands using the same config reach it through
`<state_dir>/sim/endpoints.json`, which exists only while it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys

from ..core.config import Config, SimulatorConfig
from ..core.config_load import load_config
from ..core.tomlschema import flag
from ..sim.cluster import Sim
from ..sim.dialects import DEFAULT as DEFAULT_DIALECT
from ..sim.dialects import NAMES as DIALECTS
from ..sim.runner import AlreadyRunning, published_sim
from ..sim.scenarios import SCENARIOS, scenario_listing


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sim", help="run the simulated cluster (SSH, engines, Home Assistant) "
                                   "on loopback until interrupted",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default=None,
                   help="a seed incident to reproduce (default: [simulator] scenario)")
    p.add_argument("--speed", type=flag(SimulatorConfig, "speed"), default=None,
                   help="simulated seconds per real second (default: [simulator] speed)")
    p.add_argument("--seed", type=flag(SimulatorConfig, "seed"), default=None,
                   help="random seed (default: [simulator])")
    p.add_argument("--dialect", choices=DIALECTS, default=None,
                   help="which engine release the simulated engines of that kind speak, from "
                        "the wheels' own strings, over any scenario's (default: [simulator] "
                        f"dialect, {DEFAULT_DIALECT} unless set; docs/DIALECTS.md)")
    p.add_argument("--list-scenarios", action="store_true", help="list scenarios and exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.list_scenarios:
        print(scenario_listing())
        return 0
    config = load_config(args.config)
    scenario = args.scenario or config.simulator.scenario
    if scenario not in SCENARIOS:
        print(f"sparktui sim: {config.path}: simulator.scenario: unknown scenario {scenario!r} "
              f"(known: {', '.join(sorted(SCENARIOS))})", file=sys.stderr)
        return 2
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(config, args))
    except AlreadyRunning as exc:
        print(f"sparktui sim: {exc}", file=sys.stderr)
        return 1
    return 0


async def _serve(config: Config, args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    async with published_sim(config, scenario=args.scenario, speed=args.speed,
                             seed=args.seed, dialect=args.dialect) as sim:
        print(json.dumps(sim.endpoints()), flush=True)
        print(f"sim: {len(sim.nodes)} nodes, scenario {sim.spec.scenario}, "
              f"dialect {sim.spec.dialect}, "
              f"speed {sim.clock.speed:g}x, seed {sim.spec.seed}")
        for name, node in sim.nodes.items():
            print(f"  {name:6} ssh 127.0.0.1:{sim.sshd[name].port}  api {node.api_host}  "
                  f"liveness {sim.liveness_ports[name]}  power {node.power}")
        print(f"  home assistant http://127.0.0.1:{sim.ha_port} (token file {sim.token_file})")
        print("Ctrl-C to stop", flush=True)
        watcher = asyncio.create_task(_report_changes(sim))
        await stop.wait()
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    print("sim: stopped", file=sys.stderr)


async def _report_changes(sim: Sim) -> None:
    """One human line whenever a node's power or memory state changes, or its
    Home Assistant bans a client (ip_ban, after failed logins)."""
    last: dict[str, str] = {}
    banned: set[str] = set()
    while True:
        if sim.ha is not None and (new := sim.ha.banned - banned):
            banned |= new
            print(f"sim: Home Assistant banned {', '.join(sorted(new))} after "
                  f"{sim.ha.ip_ban_threshold} failed logins (a refused token was retried)",
                  flush=True)
        for name, node in sim.nodes.items():
            state = node.power if not node.thrashing else "THRASHING"
            if last.get(name, state) != state:
                print(f"sim: {name} {last[name]} -> {state}", flush=True)
            last[name] = state
        await asyncio.sleep(0.5)
