"""`sparktui demo`: the simulated cluster and the console, in one process.

The README's first command. The simulator (eight Sparks over real SSH,
engines with real HTTP, Home Assistant) runs on loopback with the shipped
config; the console talks to it exactly as it would to a real cluster.

The console runs on the simulator's clock, so every window (stall, PSI
sustain, plug-off wait) means the same simulated time the engines live in;
its poll interval is stretched to at least MIN_REAL_POLL_S of real time so a
60x demo does not probe eight nodes thirty times a second, and its slow tier
alike (`ConsoleConfig.with_tick`): as many fast ticks between two slow ones as
configured, not a slow tier (docker, Home Assistant, liveness) on every tick.

The palette (`:`) offers the running scenario's trigger first, as "demo: ..."
entries: the long-prompt night plays from the keyboard alone ("demo: long
prompt 1/2 — serve <the 196k lane> first", then "demo: send the 150K prompt to
<lane>": refused by the prompt-length guard, ``o`` overrides it with the
lane's name typed), and so does Boot D ("demo: Boot D", the refused serve
with the fit overridden: the OOM prediction, then the thrash).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import sys
from functools import partial
from typing import TYPE_CHECKING

from ..core.config import Config, ConsoleConfig, SimulatorConfig
from ..core.config_load import load_config
from ..core.tomlschema import flag
from ..ops.guards import Override
from ..sim.scenarios import SCENARIOS, scenario_listing
from ..tui.logsink import logged_to_file
from .crash import DEBUG_LOG
from .main import default_config_path

if TYPE_CHECKING:  # the console, the service and the simulator load only to run one:
    from ..service.cluster import ClusterService  # `--list-scenarios` reads a table
    from ..sim.cluster import Sim
    from ..tui.app import SparkTUI
    from ..tui.commands import Command

MIN_REAL_POLL_S = 0.5
BOOT_D = "dsv41-flash-r37-4x-eager"
"""The seeds' Boot D (09-14 14:37): DS4.1 eager on 4 nodes, 127.6 GB per rank
against 121.6 GiB; the fit refuses it, the operator overrode, all four thrashed."""
LONG_PROMPT_TOKENS = 150_000
"""The seeds' 22:45 prompt: ~150K tokens into a 196K-context lane."""
LONG_PROMPT_LANE = "glm53-mxfp4-fp8-4x-r39-196k"
"""That lane (99 GiB weights/rank, an 11 GiB KV pin): the long-prompt scenario's."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="start the simulated cluster and the console on it",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", choices=sorted(SCENARIOS), default=None,
                   help="a seed incident to reproduce (default: [simulator] scenario); "
                        "--list-scenarios describes them")
    p.add_argument("--list-scenarios", action="store_true",
                   help="list the scenarios and what each reproduces, then exit")
    p.add_argument("--speed", type=flag(SimulatorConfig, "speed"), default=None,
                   help="simulated seconds per real second (default: [simulator] speed)")
    p.add_argument("--read-only", action="store_true", help="the observers' console")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.list_scenarios:
        print(scenario_listing())
        return 0
    from ..sim.runner import AlreadyRunning

    config = load_config(args.config or default_config_path())
    if not config.simulator.enabled:
        print("sparktui demo: this config has [simulator] enabled = false; the demo only "
              "runs on the simulator (use `sparktui` for the real cluster)", file=sys.stderr)
        return 2
    try:
        # the simulator shuts down after the console closed: what it (or the
        # service) logs meanwhile goes to the debug log, not over the shell
        with logged_to_file(config.state_dir() / DEBUG_LOG) as logged, \
                contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_demo(args, config))
    except AlreadyRunning as exc:
        print(f"sparktui demo: {exc}\nsparktui demo: open the console on it with `sparktui`, "
              "or stop it first", file=sys.stderr)
        return 2
    if said := logged.summary("sparktui demo"):
        print(said, file=sys.stderr)
    return 0


async def _demo(args: argparse.Namespace, config: Config) -> None:
    from ..service.cluster import ClusterService
    from ..sim.runner import published_sim
    from ..tui.app import make_app

    async with published_sim(config, scenario=args.scenario, speed=args.speed) as sim:
        console = dataclasses.replace(config, console=demo_console(config, sim.clock.speed))
        service = ClusterService(console, clock=sim.clock)
        holder: list[SparkTUI] = []
        app = make_app(console, service=service, read_only=args.read_only, tune_gc=True,
                       demo_commands=lambda: triggers(sim, service, holder[0],
                                                      sim.spec.scenario))
        holder.append(app)
        app.title_notes.append(f"SIMULATOR {sim.spec.scenario} {sim.clock.speed:g}x")
        await app.run_async()


def demo_console(config: Config, speed: float | None) -> ConsoleConfig:
    """The console's poll cadence on a simulator at ``speed``: the poll
    interval at least MIN_REAL_POLL_S real seconds, the slow tier stretched
    by the same factor."""
    c = config.console
    return c.with_tick(max(c.poll_interval_s, MIN_REAL_POLL_S * (speed or 1.0)))


def triggers(sim: Sim, service: ClusterService, app: SparkTUI,
             scenario: str) -> list[Command]:
    """What the operator did those nights, offered in the palette, the running
    scenario's first: the long-prompt night's lane (serve it, until it serves:
    the entry says which lane and that the prompt comes next), the long prompt
    to any lane that is up, and Boot D's overridden serve (until its lane
    exists). A lane without a running rank 0 says so when chosen."""
    lanes = service.lanes()
    ready = {name for name, lane in lanes.items() if lane.phase not in ("starting", "failed")}
    boot_d: list[Command] = []
    if BOOT_D in service.recipes and BOOT_D not in lanes:
        cluster = boot_d_cluster(service.config, service.recipes[BOOT_D].cluster)
        boot_d.append((f"demo: Boot D — serve {BOOT_D} on {cluster}, fit overridden",
                       partial(app.propose_serve, BOOT_D, cluster, frozenset({Override.FIT})),
                       "the seeds' 127.6 GB/rank boot (typed confirm): the OOM prediction, "
                       "then the thrash"))
    prompts: list[Command] = [
        (f"demo: send the 150K prompt to {name}", partial(_send_prompt, sim, app, name),
         f"a {LONG_PROMPT_TOKENS:,}-token request, as the 22:45 one "
         "(long-prompt scenario: sample_tokens times out, nodes thrash); "
         "refused past the lane's envelope unless overridden")
        for name in sorted(ready, key=lambda n: (n != LONG_PROMPT_LANE, n))]
    if LONG_PROMPT_LANE not in ready and LONG_PROMPT_LANE in service.recipes:
        if LONG_PROMPT_LANE in lanes:
            phase = lanes[LONG_PROMPT_LANE].phase
            prompts.insert(0, (f"demo: long prompt 2/2 — waits for {LONG_PROMPT_LANE} to serve",
                               partial(app.notify, f"{LONG_PROMPT_LANE} is {phase}: the 150K "
                                       "prompt is offered here once it serves"),
                               f"the long-prompt night's lane is {phase}"))
        else:
            prompts.insert(0, (f"demo: long prompt 1/2 — serve {LONG_PROMPT_LANE} first",
                               partial(app.pick_cluster, LONG_PROMPT_LANE),
                               "the 22:45 lane (196K context); once it serves, 'demo: send "
                               "the 150K prompt to' it is offered here"))
    return [*boot_d, *prompts] if scenario == "boot-d-oom" else [*prompts, *boot_d]


def boot_d_cluster(config: Config, own: str) -> str:
    """Boot D's own cluster, or (its nodes protected in this config: the guard
    would refuse, not the fit) the first unprotected cluster of as many nodes."""
    protected = set(config.guards.protected_nodes)
    size = len(config.clusters[own].nodes)
    return next((name for name, c in config.clusters.items()
                 if len(c.nodes) == size and not protected & set(c.nodes)), own)


def _send_prompt(sim: Sim, app: SparkTUI, lane: str,
                 overrides: frozenset[Override] = frozenset()) -> None:
    """The long prompt as a guarded workflow (ops/workflows/prompt.py): on a lane
    whose envelope is unmeasured (the 196k lane) or whose ceiling is shorter it is
    refused, and ``o`` on the refusal fires it anyway, the lane's name typed."""
    app.propose(lambda: app.service.preview_prompt(
        lane, LONG_PROMPT_TOKENS, partial(sim.run_prompt, lane, LONG_PROMPT_TOKENS), overrides),
        f"the {LONG_PROMPT_TOKENS:,}-token prompt to {lane}",
        partial(_send_prompt, sim, app, lane))
