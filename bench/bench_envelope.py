"""What the envelope ladder costs the console, and what it buys the fit.

1. Sampling cost: the ladder reads MemAvailable/PSI on every rank's node at
   2.5 Hz through the node's long-lived reader shell (shell builtins, no fork).
   Side by side in one run: the console's CPU per second of sampling for 4 and
   8 nodes, against the poller's own fast tick (FAST_SECTIONS) at the same rate.
   The simulated cluster runs in a child process (bench_poll.py's), so the
   client CPU measured here is the console's own; the simulator's is shown
   beside it (on a real cluster it is spent on the nodes).
2. The fit's error before/after calibration on the simulator: the longest safe
   prompt of the 22:45 incident lane as the recipe's hand-typed `[fit]`
   coefficients predict it (core/fit.py) and as the ladder measured it, each
   against the simulator's hidden truth (sim/memory.py).

    .venv/bin/python bench/bench_envelope.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_poll", ROOT / "bench" / "bench_poll.py")
bp = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules["bench_poll"] = bp
_spec.loader.exec_module(bp)  # type: ignore[union-attr]

from sparktui.adapters.ssh import NodeConnection  # noqa: E402
from sparktui.core.probe import FAST_SECTIONS, probe_script  # noqa: E402
from sparktui.ops.workflows.envelope import SAMPLE_INTERVAL_S, SECTIONS  # noqa: E402

INCIDENT = "glm53-mxfp4-fp8-4x-r39-196k"


def host_line() -> str:
    load = os.getloadavg()
    return (f"host: {platform.node()} {platform.machine()} {os.cpu_count()} CPU, Python "
            f"{platform.python_version()}, load {load[0]:.1f} {load[1]:.1f}")


async def sampling(n_nodes: int, seconds: float) -> list[tuple[str, float, float, float]]:
    """(way, client CPU ms per wall second, sim CPU ms per wall second, ms per round)."""
    out = []
    with bp.sim_process(n_nodes) as target:
        conns = [NodeConnection(ep, bp.SSH) for ep in target.endpoints]
        try:
            for way, sections, read in (("envelope sample (reader shell)", SECTIONS, True),
                                        ("poller fast tick (probe shell)", FAST_SECTIONS,
                                         False)):
                scripts = [probe_script(n, sections) for n in target.nodes]

                async def one(scripts: list[str] = scripts, read: bool = read) -> None:
                    if read:
                        await asyncio.gather(*(c.read(s, 10) for c, s in
                                               zip(conns, scripts, strict=True)))
                    else:
                        await asyncio.gather(*(c.probe(s, 10) for c, s in
                                               zip(conns, scripts, strict=True)))

                await one()  # warm-up: connections and shells
                cpu0, srv0 = bp.cpu_now(), bp.server_cpu(target.server_pid)
                t0 = time.perf_counter()
                rounds = 0
                while time.perf_counter() - t0 < seconds:
                    r0 = time.perf_counter()
                    await one()
                    rounds += 1
                    await asyncio.sleep(max(0.0, SAMPLE_INTERVAL_S - (time.perf_counter() - r0)))
                wall = time.perf_counter() - t0
                cpu = (bp.cpu_now() - cpu0) / wall * 1000
                srv1 = bp.server_cpu(target.server_pid)
                srv = (srv1 - srv0) / wall * 1000 if srv0 is not None and srv1 else 0.0
                out.append((way, cpu, srv, wall / rounds * 1000))
        finally:
            for c in conns:
                await c.close()
    return out


async def calibration() -> tuple[int | None, int, int]:
    """(the recipe's predicted ceiling, the ladder's, the simulator's truth) for the
    incident lane, from a ladder run on the manual clock."""
    sys.path.insert(0, str(ROOT / "tests"))
    from ops.test_envelope_sim import climb, truth_ceiling
    from ops.test_qualify_sim import boot
    from sparktui.core.config_load import load_config
    from sparktui.core.fit import fit
    from sparktui.core.recipe_load import load_recipe
    from sparktui.ops.context import open_context
    from sparktui.sim.testing import running_sim

    with tempfile.TemporaryDirectory() as tmp:
        import shutil
        shutil.copytree(ROOT / "recipes", Path(tmp) / "recipes")
        text = (ROOT / "config.toml").read_text().replace(
            'state_dir = "~/.local/state/sparktui"', f'state_dir = "{tmp}/state"')
        (Path(tmp) / "config.toml").write_text(text)
        config = load_config(Path(tmp) / "config.toml")
        recipe = load_recipe(config, INCIDENT)
        before = fit(config, recipe, recipe.cluster).longest_safe_prompt_tokens
        async with running_sim(config) as sim:
            path = config.state_dir() / "sim" / "endpoints.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            import json
            path.write_text(json.dumps(sim.endpoints()))
            async with open_context(config, clock=sim.clock) as ctx:
                lane = await boot(sim, ctx, INCIDENT)
                await climb(sim, ctx, lane)
                truth = truth_ceiling(sim, ctx, lane)
        after = fit(config, load_recipe(config, INCIDENT), recipe.cluster)
        assert after.longest_safe_prompt_tokens is not None
        return before, after.longest_safe_prompt_tokens, truth


async def run(args: argparse.Namespace) -> None:
    print(host_line())
    print(f"1. sampling at {1 / SAMPLE_INTERVAL_S:g} Hz for {args.seconds:g} s "
          f"(client = the console's CPU; sim = the nodes' side)")
    for n in (4, 8):
        for way, cpu, srv, per in await sampling(n, args.seconds):
            print(f"  {n} nodes  {way:<32} client {cpu:6.1f} ms CPU/s  sim {srv:6.1f} ms CPU/s"
                  f"  {per:6.1f} ms/round")
    before, after, truth = await calibration()
    print("2. longest safe prompt on the 22:45 lane (simulator truth "
          f"{truth:,} tokens)")
    if before is not None:
        print(f"  before (fit, the recipe's typed [fit]):        {before:,} tokens "
              f"({(before / truth - 1) * 100:+.1f} %)")
    print(f"  after  (fit, once sparktui envelope recorded): {after:,} tokens "
          f"({(after / truth - 1) * 100:+.1f} %)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--serve-sim", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_sim:
        asyncio.run(bp.serve_sim(args.serve_sim))
    else:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
