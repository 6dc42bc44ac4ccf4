"""What the console's timed full collection (`tui/app.py`: GC_FULL_EVERY_S)
finds, to say whether it is needed (issue 25: the timer that crashed every
console was kept only because this measures that it frees something).

    .venv/bin/python bench/bench_full_collection.py [--every 240] [--minutes 9]

`sparktui demo --speed 1` (the shipped 2 s poll) runs in tmux at 80x24 with
keys every 1.5 s across panes and modals; the full pass runs every
``--every`` real seconds instead of 600 (a wrapper sets the constant and
wraps the pass to log it: the product is not changed). Each pass prints:
objects found unreachable (cyclic garbage the young passes had not freed),
objects in the oldest generation before it, the pause, and the RSS before and
after. Without the timer, garbage promoted to the oldest generation waits for
Python's own full pass: the third threshold (1,000 middle passes) at the
middle pass's pace this shows (`gc stats`)."""

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
import gc, sys, time
import psutil
from sparktui.tui import app as app_mod
app_mod.GC_FULL_EVERY_S = @EVERY@
log = open(@LOG@, "a", buffering=1)
t0 = time.monotonic()
def collect_fully(self) -> None:
    p = psutil.Process()
    before, old = p.memory_info().rss, len(gc.get_objects(2))
    start = time.perf_counter()
    found = gc.collect()
    pause = (time.perf_counter() - start) * 1000
    young, middle, full = (s["collections"] for s in gc.get_stats())
    log.write(f"{time.monotonic() - t0:5.0f} s: {found:,} unreachable, {old:,} in the "
              f"oldest generation before, pause {pause:.0f} ms, RSS {before / 2**20:.1f} -> "
              f"{p.memory_info().rss / 2**20:.1f} MiB; passes so far young {young}, "
              f"middle {middle}, full {full}\\n")
app_mod.SparkTUI._collect_fully = collect_fully
from sparktui.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def host_line() -> str:
    load = os.getloadavg()
    return (f"host: {platform.node()} {platform.machine()} {os.cpu_count()} CPU, Python "
            f"{platform.python_version()}, load {load[0]:.1f} {load[1]:.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=240.0, help="seconds between passes")
    parser.add_argument("--minutes", type=float, default=9.0, help="how long the console runs")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        print("tmux is needed", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="sparktui-gc-"))
    shutil.copytree(ROOT / "recipes", work / "recipes")
    config = (ROOT / "config.toml").read_text().replace(
        'state_dir = "~/.local/state/sparktui"', f'state_dir = "{work / "state"}"', 1)
    (work / "config.toml").write_text(config)
    log = work / "gc.log"
    log.touch()
    wrapper = WRAPPER.replace("@EVERY@", repr(args.every)).replace("@LOG@", repr(str(log)))
    (work / "wrap.py").write_text(wrapper)
    (work / "home").mkdir()
    sock = f"sparktui-gc-{os.getpid()}"

    def tmux(*a: str) -> None:
        subprocess.run(["tmux", "-L", sock, *a], check=False, capture_output=True, timeout=30)

    print(host_line())
    tmux("-f", "/dev/null", "new-session", "-d", "-s", "gc", "-x", "80", "-y", "24", "env",
         f"HOME={work / 'home'}", f"PYTHONPATH={ROOT / 'src'}", "TERM=xterm-256color",
         "LANG=C.UTF-8", sys.executable, str(work / "wrap.py"), "--config",
         str(work / "config.toml"), "demo", "--speed", "1")
    try:
        end, i, shown = time.monotonic() + args.minutes * 60, 0, 0
        while time.monotonic() < end:
            tmux("send-keys", "-t", "gc", KEYS[i % len(KEYS)])
            i += 1
            time.sleep(1.5)
            lines = log.read_text().splitlines()
            for line in lines[shown:]:
                print(line, flush=True)
            shown = len(lines)
    finally:
        tmux("send-keys", "-t", "gc", "q")
        time.sleep(5)
        tmux("kill-server")
    print(f"{i} keys in {args.minutes:g} min, a full pass every {args.every:g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
