"""False UNRESPONSIVE alerts per simulated night, the demo's way (issue 25).

The console's service on a simulator whose clock runs at ``--speed`` (as
`sparktui demo` runs it: the service on the simulator's clock, so the
canary's 10 s bound is 10/speed real seconds), the normal scenario, one lane
served and left idle all night with its canary rounds and endpoint checks.
Counts the canary alerts raised and the endpoint checks the lane spent
``unresponsive``. ``--hogs N`` runs N CPU-bound processes beside it (a loaded
2-core host); the tests' night soak (tests/soak/test_night_soak.py) is the
same night on the manual clock, where load cannot move simulated time.

Usage: python bench/bench_canary_night.py [--hours 8] [--speed 60] [--hogs 0]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sparktui.adapters.endpoints import resolve_endpoints, sim_endpoints_path
from sparktui.cli.demo_cmd import demo_console
from sparktui.core.config_load import load_config
from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.service.cluster import ClusterService
from sparktui.service.events import AlertRaised, LaneChanged, ServiceEvent
from sparktui.sim.testing import connect, running_sim

ROOT = Path(__file__).resolve().parents[1]
CLUSTER, LANE = "2nodes-dac", "glm53-flash-eugr-2x"


async def night(hours: float, speed: float) -> dict[str, object]:
    config = load_config(ROOT / "config.toml")
    keep = config.clusters[CLUSTER].nodes
    with tempfile.TemporaryDirectory(prefix="canary-night-") as tmp:
        config = dataclasses.replace(
            config, nodes={n: c for n, c in config.nodes.items() if n in keep},
            clusters={CLUSTER: config.clusters[CLUSTER]},
            console=dataclasses.replace(config.console, state_dir=f"{tmp}/state"))
        async with running_sim(config, scenario="normal", speed=speed,
                               workdir=Path(tmp) / "sim") as sim:
            path = sim_endpoints_path(config)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(sim.endpoints()))
            recipe = load_recipe(config, LANE)
            for rank in plan(config, recipe, recipe.cluster).ranks:
                async with connect(sim, rank.node) as conn:
                    await conn.run(rank.command(3), timeout=30)
            console = dataclasses.replace(config, console=demo_console(config, speed))
            service = ClusterService(console, clock=sim.clock,
                                     endpoints=resolve_endpoints(config))
            events: list[tuple[float, ServiceEvent]] = []
            await service.start(lambda e: events.append((sim.clock.monotonic(), e)))
            try:
                while (v := service.lanes().get(LANE)) is None or v.phase != "serving":
                    assert sim.clock.monotonic() < 6 * 3600, "the lane never served"
                    await asyncio.sleep(0.2)
                began, wall = sim.clock.monotonic(), time.monotonic()
                while sim.clock.monotonic() - began < hours * 3600:
                    await asyncio.sleep(1.0)
            finally:
                await service.stop()
    raised = [(round(t - began), e.alert.evidence) for t, e in events
              if isinstance(e, AlertRaised) and e.alert.key.startswith("canary:")]
    views = [e.lane for t, e in events if isinstance(e, LaneChanged) and t >= began
             and e.lane.name == LANE]
    failed = [v.canary for v in views
              if v.canary and v.canary[0].startswith("/health answers 200 but")]
    return {"simulated_h": hours, "speed": speed, "wall_s": round(time.monotonic() - wall),
            "unresponsive_alerts": len(raised), "alerts": raised[:10],
            "unresponsive_views": sum(v.phase == "unresponsive" for v in views),
            "failed_rounds_shown": len(failed), "failed_round_example": failed[:1],
            "load": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=float, default=8.0)
    ap.add_argument("--speed", type=float, default=60.0)
    ap.add_argument("--hogs", type=int, default=0, help="CPU-bound processes beside it")
    args = ap.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.hogs)]
    try:
        result = asyncio.run(night(args.hours, args.speed))
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    print(json.dumps({**result, "hogs": args.hogs}, indent=1))


if __name__ == "__main__":
    main()
