"""One-shot CLI start-up: `sparktui fit RECIPE --json` as a whole process,
beside `python -c pass` (the interpreter alone) and `import sparktui.cli.main`
measured in the same run, alternating so a loaded box hits all three alike.

    .venv/bin/python bench/bench_cli.py [--runs 15] [--recipe glm53-mxfp4-fp8-4x-r39]

Target (issue 16): the fit process <= 0.2 s on the build box.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


PYCACHE = tempfile.mkdtemp(prefix="sparktui-bench-pycache-")
"""Byte code is cached (as an installed package has it) in a private
directory, even where PYTHONDONTWRITEBYTECODE is set."""


def wall(argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the child): CPU time is what a loaded box disturbs least."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONPYCACHEPREFIX": PYCACHE}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--recipe", default="glm53-mxfp4-fp8-4x-r39")
    args = ap.parse_args()
    py = sys.executable
    ways = {
        "python -c pass": [py, "-c", "pass"],
        "import sparktui.cli.main": [py, "-c", "import sparktui.cli.main"],
        f"sparktui fit {args.recipe} --json": [
            py, "-m", "sparktui", "--config", str(ROOT / "config.toml"), "fit", args.recipe,
            "--json"],
    }
    times: dict[str, list[float]] = {w: [] for w in ways}
    cpus: dict[str, list[float]] = {w: [] for w in ways}
    for argv in ways.values():
        wall(argv)  # warm the page cache and the .pyc files
    for _ in range(args.runs):
        for way, argv in ways.items():
            elapsed, cpu = wall(argv)
            times[way].append(elapsed)
            cpus[way].append(cpu)
    base = statistics.median(times["python -c pass"])
    cpu_base = statistics.median(cpus["python -c pass"])
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| process | runs | wall s (median) | wall min | wall vs python -c pass "
          "| CPU s (median) | CPU vs python -c pass |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for way, ts in times.items():
        med, cpu = statistics.median(ts), statistics.median(cpus[way])
        print(f"| {way} | {len(ts)} | {med:.3f} | {min(ts):.3f} | {med / base:.1f}x "
              f"| {cpu:.3f} | {cpu / cpu_base:.1f}x |")


if __name__ == "__main__":
    main()
