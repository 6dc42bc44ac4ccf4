"""How fast the simulator starts (and stops): the shipped 8-node fleet and a
64-node fleet, each started and stopped `--repeat` times; plus the time for
one SSH command on a started fleet, and the real time the manual clock needs
to play the seeds' 122-minute 8-way cold load to "ready". One JSON line per case.

    .venv/bin/python bench/bench_sim_start.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from sparktui.core.config import Config
from sparktui.core.config_load import load_config
from sparktui.core.recipe_load import load_recipe
from sparktui.core.render import plan
from sparktui.sim.spec import small_spec
from sparktui.sim.testing import connect, running_sim

ROOT = Path(__file__).resolve().parents[1]


async def case(name: str, make, repeat: int) -> dict[str, object]:
    starts, stops, cmds = [], [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        ctx = make()
        sim = await ctx.__aenter__()
        t1 = time.perf_counter()
        first = next(iter(sim.nodes))
        async with connect(sim, first) as conn:
            t2 = time.perf_counter()
            await conn.run("cat /proc/meminfo /proc/pressure/memory", timeout=10)
            cmds.append(time.perf_counter() - t2)
        t3 = time.perf_counter()
        await ctx.__aexit__(None, None, None)
        stops.append(time.perf_counter() - t3)
        starts.append(t1 - t0)
    return {"case": name, "nodes": len(sim.nodes), "repeat": repeat,
            "start_s_median": round(statistics.median(starts), 4),
            "start_s_max": round(max(starts), 4),
            "stop_s_median": round(statistics.median(stops), 4),
            "command_s_median": round(statistics.median(cmds), 4)}


async def cold_load(config: Config) -> dict[str, object]:
    lane = "dsv41-flash-8x"
    async with running_sim(config, scenario="slow-8way-nfs") as sim:
        p = plan(config, load_recipe(config, lane), "8nodes-switch")
        for rank in p.ranks:
            async with connect(sim, rank.node) as conn:
                await conn.run(rank.command(3), timeout=10)
        t0 = time.perf_counter()
        simulated = 0.0
        while sim.lane_rank0(lane).phase != "ready":
            await sim.advance(600)
            simulated += 600
        return {"case": "cold-load-8x-122min", "simulated_s": simulated,
                "real_s": round(time.perf_counter() - t0, 3), "scheduler_steps": sim.sched.steps}


async def main(repeat: int) -> None:
    config = load_config(ROOT / "config.toml")
    for name, make in (("fleet-8", lambda: running_sim(config)),
                       ("scale-64", lambda: running_sim(spec=small_spec(64)))):
        print(json.dumps(await case(name, make, repeat)), flush=True)
    print(json.dumps(await cold_load(config)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    asyncio.run(main(parser.parse_args().repeat))
