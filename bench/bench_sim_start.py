"""How fast the simulator starts (and stops): the shipped 8-node fleet and a
64-node fleet, each started and stopped `--repeat` times; plus the time for
one SSH command on a started fleet. Prints one JSON line per case.

    .venv/bin/python bench/bench_sim_start.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

from sparktui.core.config_load import load_config
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


async def main(repeat: int) -> None:
    config = load_config(ROOT / "config.toml")
    for name, make in (("fleet-8", lambda: running_sim(config)),
                       ("scale-64", lambda: running_sim(spec=small_spec(64)))):
        print(json.dumps(await case(name, make, repeat)), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    asyncio.run(main(parser.parse_args().repeat))
