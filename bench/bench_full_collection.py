"""What the console's timed full collection (`tui/app.py`: GC_FULL_EVERY_S)
finds, to say whether it is needed (issue 25: the timer that crashed every
console was kept only because this measures that it frees something).

    .venv/bin/python bench/bench_full_collection.py [--every 240] [--minutes 11]

`sparktui demo --speed 1` (the shipped 2 s poll) runs in tmux at 80x24 with
keys every 1.5 s across panes and modals; the full pass runs every
``--every`` real seconds if given (a wrapper sets the constant and wraps the
pass to log it: the product is not changed). Each pass prints:
objects found unreachable (cyclic garbage the young passes had not freed),
objects in the oldest generation before it, the pause, and the RSS before and
after. Without the timer, garbage promoted to the oldest generation waits for
Python's own full pass: the third threshold (1,000 middle passes) at the
middle pass's pace this shows (`gc stats`).

Two consoles run side by side in one run (two tmux sessions, the same keys,
the same host): ``plain``, where the timed pass is ``gc.collect()`` alone
every 600 s (round 12's), and ``shipped``, where it is the product's own
``SparkTUI._collect_fully`` every GC_FULL_EVERY_S. Each timed pass logs its
wall and CPU time, then runs a second full pass (nothing left to free: what
walking the survivors costs), and the objects the collector still tracks
(not frozen). At exit each console logs every pass of every generation the
collector ran (count, how many took 50 ms or more, median, max, total: the
middle passes pause the console too), then how much cyclic garbage was
among its frozen objects (what no pass could free)."""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEYS = ["1", "2", "3", "4", "s", "Escape", "?", "Escape", "!", "Escape", ":", "Escape", "Tab"]
WRAPPER = """
import atexit, gc, sys, time
import psutil
from sparktui.tui import app as app_mod
if @EVERY@ is not None:
    app_mod.GC_FULL_EVERY_S = @EVERY@
log = open(@LOG@, "a", buffering=1)
t0 = time.monotonic()
shipped = app_mod.SparkTUI._collect_fully
found: list[int] = []
pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
began = [0.0]
measuring = [True]
def full_passes(phase: str, info: dict) -> None:
    if phase == "start":
        began[0] = time.perf_counter()
        return
    if measuring[0]:
        pauses[info["generation"]].append((time.perf_counter() - began[0]) * 1000)
    if info["generation"] == 2:
        found.append(info["collected"])
gc.callbacks.append(full_passes)
def tracked() -> int:
    return sum(len(gc.get_objects(g)) for g in range(3))
def collect_fully(self) -> None:
    p = psutil.Process()
    before, old, live = p.memory_info().rss, len(gc.get_objects(2)), tracked()
    cpu, start = time.process_time(), time.perf_counter()
    found.clear()
    gc.collect() if @PLAIN@ else shipped(self)
    freed = sum(found)
    pause, cpu = (time.perf_counter() - start) * 1000, (time.process_time() - cpu) * 1000
    start, measuring[0] = time.perf_counter(), False
    gc.collect()
    again, measuring[0] = (time.perf_counter() - start) * 1000, True
    young, middle, full = (s["collections"] for s in gc.get_stats())
    log.write(f"{time.monotonic() - t0:5.0f} s: pause {pause:.0f} ms (CPU {cpu:.0f} ms), "
              f"{freed:,} unreachable, {live:,} tracked "
              f"({old:,} oldest), {gc.get_freeze_count():,} frozen; a pass right after: "
              f"{again:.0f} ms; RSS {before / 2**20:.1f} -> {p.memory_info().rss / 2**20:.1f}"
              f" MiB; passes young {young}, middle {middle}, full {full}\\n")
app_mod.SparkTUI._collect_fully = collect_fully
def leaked() -> None:
    measuring[0] = False
    for gen, ms in pauses.items():
        ms.sort()
        log.write(f"every pass of generation {gen}: {len(ms)}, "
                  f"{sum(m >= 50 for m in ms)} of them >= 50 ms, "
                  f"median {ms[len(ms) // 2] if ms else 0:.1f} ms, "
                  f"max {max(ms, default=0):.0f} ms, total {sum(ms) / 1000:.2f} s\\n")
    gc.collect()  # what the collector sees
    gc.unfreeze()
    log.write(f"at exit: {gc.collect():,} unreachable among the objects that were frozen "
              f"(cyclic garbage no pass could free)\\n")
atexit.register(leaked)
from sparktui.cli.main import main
sys.exit(main(sys.argv[1:]))
"""
VARIANTS = ("plain", "shipped")
PLAIN_EVERY_S = 600.0
"""Round 12's interval, for the plain pass."""


def host_line() -> str:
    load = os.getloadavg()
    return (f"host: {platform.node()} {platform.machine()} {os.cpu_count()} CPU, Python "
            f"{platform.python_version()}, load {load[0]:.1f} {load[1]:.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=None,
                        help="seconds between passes, both consoles (default: each its own)")
    parser.add_argument("--minutes", type=float, default=11.0, help="how long the consoles run")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is needed", file=sys.stderr)
        return 2
    sock = f"sparktui-gc-{os.getpid()}"

    def tmux(*a: str) -> None:
        subprocess.run(["tmux", "-L", sock, *a], check=False, capture_output=True, timeout=30)

    logs: dict[str, Path] = {}
    print(host_line())
    for name in VARIANTS:
        work = Path(tempfile.mkdtemp(prefix=f"sparktui-gc-{name}-"))
        shutil.copytree(ROOT / "recipes", work / "recipes")
        config = (ROOT / "config.toml").read_text().replace(
            'state_dir = "~/.local/state/sparktui"', f'state_dir = "{work / "state"}"', 1)
        (work / "config.toml").write_text(config)
        logs[name] = work / "gc.log"
        logs[name].touch()
        every = PLAIN_EVERY_S if name == "plain" and args.every is None else args.every
        wrapper = (WRAPPER.replace("@EVERY@", repr(every))
                   .replace("@LOG@", repr(str(logs[name])))
                   .replace("@PLAIN@", repr(name == "plain")))
        (work / "wrap.py").write_text(wrapper)
        (work / "home").mkdir()
        new = ("-f", "/dev/null", "new-session") if name == VARIANTS[0] else ("new-session",)
        tmux(*new, "-d", "-s", name, "-x", "80", "-y", "24", "env",
             f"HOME={work / 'home'}", f"PYTHONPATH={ROOT / 'src'}", "TERM=xterm-256color",
             "LANG=C.UTF-8", sys.executable, str(work / "wrap.py"), "--config",
             str(work / "config.toml"), "demo", "--speed", "1")
    try:
        end, i = time.monotonic() + args.minutes * 60, 0
        shown = dict.fromkeys(VARIANTS, 0)
        while time.monotonic() < end:
            for name in VARIANTS:
                tmux("send-keys", "-t", name, KEYS[i % len(KEYS)])
            i += 1
            time.sleep(1.5)
            for name in VARIANTS:
                lines = logs[name].read_text().splitlines()
                for line in lines[shown[name]:]:
                    print(f"{name:>7} {line}", flush=True)
                shown[name] = len(lines)
    finally:
        for name in VARIANTS:
            tmux("send-keys", "-t", name, "q")
        time.sleep(10)
        tmux("kill-server")
        for name in VARIANTS:
            for line in logs[name].read_text().splitlines()[shown[name]:]:
                print(f"{name:>7} {line}", flush=True)
    every = (f"every {args.every:g} s" if args.every is not None else
             f"plain every {PLAIN_EVERY_S:g} s, shipped every GC_FULL_EVERY_S")
    print(f"{i} keys to each console in {args.minutes:g} min, a full pass {every}; "
          f"{host_line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
