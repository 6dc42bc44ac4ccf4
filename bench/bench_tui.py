"""The console's own costs: time to first paint, idle CPU with 8 nodes at a
2 s poll, and key-to-paint latency while a boot log streams at full speed.

    .venv/bin/python bench/bench_tui.py                   # all three
    .venv/bin/python bench/bench_tui.py --idle-s 60       # a longer idle window
    .venv/bin/python bench/bench_tui.py --full-pass --skip-sim   # keys during the 60 s GC pass

- **first paint**: from `run_test()` entry to the first frame, and to the
  first frame showing all 8 nodes online, against the simulator (real SSH)
  running in a child process (`sparktui sim`).
- **idle CPU**: this process only (the simulator is a child: on a real
  cluster its work happens on the nodes), with the console polling the 8
  simulated nodes every 2 s (wall clock), no lane booting.
- **key-to-paint**: the scripted fleet (tests/tui/fakecluster.py) floods one
  rank's `docker logs` as fast as the console takes it; keys that change
  the boot log (follow, severity level, pane switch) are sent through the
  driver and timed to the first frame composed after the key's action ran.
  Frames are rendered to terminal bytes (what a real terminal would get),
  though nothing is written.

- **incident vs calm** (``--incident``): at 80x24, in one run, side by side:
  a calm console (no log, no alerts) and the incident (the boot log offered
  at 1,000 lines/s while thrash alerts for three nodes arrive 5 times a
  second); the same keys, ``a`` (acknowledge) among them.

- **keys during the timed full pass** (``--full-pass``): at 80x24, the
  incident's log at 1,000 lines/s, keys every 0.25 s; every ``--pass-gap-s``
  the console's own full pass (`SparkTUI._collect_fully`, which the
  GC_FULL_EVERY_S timer runs) is scheduled on the loop just before a key is
  sent, so that key waits the whole pass (a key arriving as a pass begins:
  the worst case; one arriving at a random moment hits a pass with odds
  pass / GC_FULL_EVERY_S). Side by side in one run: those keys' key-to-frame
  vs every other key's, and each pass's own length; the last pass is the
  tenth (`GC_THAW_EVERY`: the frozen heap collected too). The timer itself is
  moved out of the run (only the bench's passes run).

- **key-to-acknowledgement** (``--ack``): at 80x24, the keys that wait on the
  network (``P``, ``R`` on a node, ``x`` on a lane, and the serve picker's
  cluster check) with every node answering its probes 2 s late (a starved
  node): timed from the key to the first frame showing the key's own answer
  on the notice line ("preparing …"), and to the modal. Issue 28: <= 100 ms
  to the acknowledgement, whatever the modal takes.

Targets (issue 7): first paint <= 1 s, idle <= 3 % of a core, key-to-paint
p99 <= 100 ms; issue 13: key-to-paint p99 <= 50 ms during the incident.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sparktui.tui  # noqa: F401  (before textual: the console's frame rate, as the CLI has it)

# isort: split
import psutil
from rich.console import Console
from textual import constants, events

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.tui.fakecluster import FakeContainer, add_lane  # noqa: E402
from tests.tui.harness import build  # noqa: E402

from sparktui.core.config import Config  # noqa: E402
from sparktui.core.config_load import load_config  # noqa: E402
from sparktui.core.state import NodeState  # noqa: E402
from sparktui.service.cluster import ClusterService  # noqa: E402
from sparktui.service.events import Alert, AlertRaised  # noqa: E402
from sparktui.tui import app as app_mod  # noqa: E402
from sparktui.tui.app import SparkTUI, make_app  # noqa: E402
from sparktui.tui.widgets.bootlog import BootLog  # noqa: E402
from sparktui.tui.widgets.tables import NodesTable  # noqa: E402

SIZE = (160, 48)


# -- the simulator in a child process -------------------------------------------


class SimChild:
    """`sparktui sim` on a copy of the shipped config with a private state dir."""

    def __init__(self, speed: float) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bench-tui-"))
        text = (ROOT / "config.toml").read_text().replace(
            'state_dir = "~/.local/state/sparktui"', f'state_dir = "{self.dir / "state"}"')
        (self.dir / "config.toml").write_text(text)
        (self.dir / "recipes").symlink_to(ROOT / "recipes")
        self.config_path = self.dir / "config.toml"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sparktui", "--config", str(self.config_path), "sim",
             "--speed", str(speed)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)
        assert self.proc.stdout is not None
        json.loads(self.proc.stdout.readline())  # the endpoints line: it is up

    def config(self) -> Config:
        return load_config(self.config_path)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


class NullFile(io.StringIO):
    """A terminal that keeps nothing."""

    def write(self, text: str) -> int:
        return len(text)


def frames(app: SparkTUI, console: Console,
           marks: dict[str, float] | None = None) -> list[float]:
    """Record the time of every frame; render it to terminal bytes like a terminal
    driver. ``marks["online"]`` is set at the first frame showing all 8 nodes online."""
    stamps: list[float] = []
    display = app._display

    def timed(screen, renderable) -> None:  # type: ignore[no-untyped-def]
        if renderable is not None and hasattr(renderable, "render_segments"):
            renderable.render_segments(console)
            stamps.append(time.perf_counter())
            if marks is not None and "online" not in marks and all_online(app):
                marks["online"] = stamps[-1]
        display(screen, renderable)

    app._display = timed  # type: ignore[method-assign]
    return stamps


def all_online(app: SparkTUI) -> bool:
    snap = app.service.snapshot()
    table = app.main_screen.query_one(NodesTable)
    return (len(snap.nodes) == 8 and all(s.state is NodeState.ONLINE for s in snap.nodes)
            and not app.main_screen._pending_nodes and table.row_count == 8)


# -- measurements ---------------------------------------------------------------


async def first_paint(config: Config, runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"first frame": [], "8 nodes online painted": []}
    term = Console(file=NullFile(), force_terminal=True, color_system="truecolor",
                   width=SIZE[0], height=SIZE[1])
    for _ in range(runs):
        t0 = time.perf_counter()
        app = make_app(config, service=ClusterService(config), tune_gc=True)
        marks: dict[str, float] = {}
        stamps = frames(app, term, marks)
        async with app.run_test(size=SIZE) as pilot:
            while "online" not in marks:
                await pilot.pause(0.005)
            out["first frame"].append(stamps[0] - t0)
            out["8 nodes online painted"].append(marks["online"] - t0)
    return out


async def idle_cpu(config: Config, seconds: float) -> dict[str, float]:
    me = psutil.Process()
    app = make_app(config, service=ClusterService(config), tune_gc=True)
    async with app.run_test(size=SIZE) as pilot:
        while not all_online(app):
            await pilot.pause(0.05)
        await asyncio.sleep(5.0)  # warm: connections and shells open, caches filled
        c0, t0 = me.cpu_times(), time.perf_counter()
        polls0 = app.service.snapshot()
        await asyncio.sleep(seconds)
        c1, t1 = me.cpu_times(), time.perf_counter()
        polls1 = app.service.snapshot()
    cpu = (c1.user - c0.user) + (c1.system - c0.system)
    advanced = sum(1 for a, b in zip(polls0.nodes, polls1.nodes, strict=True)
                   if b.taken_at > a.taken_at)
    return {"wall_s": t1 - t0, "cpu_s": cpu, "core_pct": 100 * cpu / (t1 - t0),
            "nodes_polled": advanced}


def flood_lines(n: int, start: int) -> bytes:
    lines = []
    for i in range(start, start + n):
        s = i % 60
        lines.append(f"2026-11-29T22:41:{s:02d}.{i % 10**9:09d}Z (EngineCore_DP0 pid=312) INFO "
                     f"11-29 22:41:{s:02d} [loader.py:{i % 999}] read shard chunk {i} "
                     f"({i * 64 % 100000} KiB) from /mnt/nas/ai/huggingface")
        if i % 97 == 0:
            lines.append(f"2026-11-29T22:41:{s:02d}.{i % 10**9:09d}Z (EngineCore_DP0 pid=312) "
                         f"WARNING 11-29 22:41:{s:02d} [shm_broadcast.py:466] No available "
                         "shared memory broadcast block found in 60 seconds.")
    return ("\n".join(lines) + "\n").encode()


THRASHING = ("dgx5", "dgx6", "dgx7")


async def alerts_arriving(app: SparkTUI, per_s: float) -> None:
    """Thrash alerts for three nodes, re-raised with fresh evidence ``per_s``
    times a second, through the service's own sink."""
    i = 0
    while True:
        node = THRASHING[i % len(THRASHING)]
        app._from_service(AlertRaised(Alert(
            f"thrash:{node}", "thrash" if i % 4 else "thrash suspected", node,
            (f"PSI full avg10 {20 + i % 17}.0% >= 20%", f"MemAvailable {1 + i % 3}.2 GiB",
             f"ping answers, SSH probe failed {i}x in a row"),
            f"plug-cycle {node} only via Home Assistant")))
        i += 1
        await asyncio.sleep(1 / per_s)


async def key_to_paint(keys: int, rate: float = 0.0, *, flood: bool = True,
                       alerts_per_s: float = 0.0, size: tuple[int, int] = SIZE,
                       passes: int = 0, pass_gap_s: float = 10.0,
                       key_gap_s: float = 0.02) -> dict[str, Any]:
    """``rate``: lines/s offered by the stream; 0 = as fast as the console takes
    them. ``flood=False``: no log at all (a calm console). ``passes``: instead
    of ``keys`` keys, keys until that many full passes ran, one every
    ``pass_gap_s`` just before a key (`--full-pass`)."""
    if passes:
        app_mod.GC_FULL_EVERY_S = 1e9  # only the bench's own passes
    console = build()
    console.app.tune_gc = True
    container: FakeContainer = add_lane(console.fleet, "glm53-flash-eugr-2x", "4nodes-switch-b",
                                        ["dgx5", "dgx6", "dgx7", "dgx8"])[0]
    link = console.fleet.links["dgx5"]
    delivered = 0
    original = link.stream

    async def flood_stream(cmd: str):  # type: ignore[no-untyped-def]
        nonlocal delivered
        if container.name not in cmd:
            async for chunk in original(cmd):
                yield chunk
            return
        per_chunk = 400 if not rate else max(1, int(rate / 100))
        while True:
            chunk = flood_lines(per_chunk, delivered)
            delivered += per_chunk
            yield chunk
            await asyncio.sleep(0 if not rate else per_chunk / rate)

    if flood:
        link.stream = flood_stream  # type: ignore[method-assign]
    app = console.app
    term = Console(file=NullFile(), force_terminal=True, color_system="truecolor",
                   width=size[0], height=size[1])
    stamps = frames(app, term)
    pauses = CollectorPauses()
    handled: list[float] = []
    latencies: list[float] = []
    by_key: dict[str, list[float]] = {}
    missed: list[str] = []
    during: list[float] = []
    """Key-to-frame of the keys sent as a full pass began."""
    pass_ms: list[float] = []

    def timed_pass() -> None:
        start = time.perf_counter()
        app._collect_fully()
        pass_ms.append(1000 * (time.perf_counter() - start))

    async with app.run_test(size=size) as pilot:
        screen = app.main_screen
        for name in ("action_follow", "action_cycle_level", "action_pane", "action_ack"):
            inner = getattr(screen, name)

            def wrapped(*a, _inner=inner):  # type: ignore[no-untyped-def]
                _inner(*a)
                handled.append(time.perf_counter())

            setattr(screen, name, wrapped)
        log = screen.query_one(BootLog)
        while flood and log.row_count < min(4000, 200 + rate):
            await pilot.pause(0.01)
        alerting = (asyncio.create_task(alerts_arriving(app, alerts_per_s))
                    if alerts_per_s else None)
        await pilot.pause(0.2)
        gc.callbacks.append(pauses)
        line0, t_start = delivered, time.perf_counter()
        sequence = ["f", "f", "l", "l", "l", "3", "1", "2", "4", "3", "a"]
        app._full_passes = app_mod.GC_THAW_EVERY - passes  # the last pass thaws
        last_pass, i = t_start, -1
        while len(pass_ms) < passes if passes else i + 1 < keys:
            i += 1
            key = sequence[i % len(sequence)]
            n_handled = len(handled)
            full = bool(passes) and time.perf_counter() - last_pass >= pass_gap_s
            if full:  # runs before the key's message is taken (both queued on the loop)
                asyncio.get_running_loop().call_soon(timed_pass)
                last_pass = time.perf_counter()
            t0 = time.perf_counter()
            app._driver.send_message(events.Key(key, key))  # type: ignore[union-attr]
            deadline = t0 + 5.0
            while (len(handled) == n_handled or not stamps or stamps[-1] < handled[-1]) \
                    and time.perf_counter() < deadline:
                await asyncio.sleep(0)
            if time.perf_counter() >= deadline:
                missed.append(key)
                continue
            (during if full else latencies).append(stamps[-1] - t0)
            by_key.setdefault(key, []).append(stamps[-1] - t0)
            await asyncio.sleep(key_gap_s)
        rate = (delivered - line0) / (time.perf_counter() - t_start)
        gc.callbacks.remove(pauses)
        if alerting is not None:
            alerting.cancel()
    latencies.sort()
    p = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))]  # noqa: E731
    if os.environ.get("BENCH_TUI_BY_KEY"):
        for key, values in sorted(by_key.items()):
            print(f"  key {key}: median {1000 * statistics.median(values):.1f} ms, "
                  f"max {1000 * max(values):.1f} ms")
    if missed:
        print(f"  no frame within 5 s after keys {missed}")
    return {"keys": len(latencies), "p50_ms": 1000 * p(0.50), "p99_ms": 1000 * p(0.99),
            "max_ms": 1000 * latencies[-1], "lines_per_s": rate,
            "gc_passes": len(pauses.ms), "gc_max_ms": max(pauses.ms, default=0.0),
            "during_ms": [1000 * t for t in during], "pass_ms": pass_ms}


SLOW_NET_S = 2.0
"""How late every probe and command answers in the acknowledgement run."""


async def key_to_ack(rounds: int) -> dict[str, dict[str, float]]:
    """Per key: median and max ms from the key to the first frame with its
    acknowledgement, and to the first frame with the modal."""
    from tests.tui.scenes import hold_still, scene_console, settled

    from sparktui.tui.screens.confirm import ActionModal
    from sparktui.tui.screens.info import PickerScreen
    from sparktui.tui.widgets.alerts import NoticeLine

    console = scene_console()
    app = console.app
    term = Console(file=NullFile(), force_terminal=True, color_system="truecolor",
                   width=80, height=24)
    stamps = frames(app, term)
    said: list[tuple[float, str]] = []
    original_say = NoticeLine.say

    def say(line: NoticeLine, message: str, title: str, severity: str) -> None:
        said.append((time.perf_counter(), message))
        original_say(line, message, title, severity)

    setattr(NoticeLine, "say", say)  # noqa: B010  (the class: every line is timed)
    out: dict[str, dict[str, list[float]]] = {}
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await settled(pilot, console)
            await hold_still(console)
            for link in console.fleet.links.values():
                for name in ("probe", "run"):
                    inner = getattr(link, name)

                    async def late(*a, _inner=inner):  # type: ignore[no-untyped-def]
                        await asyncio.sleep(SLOW_NET_S)
                        return await _inner(*a)

                    setattr(link, name, late)
            screen = app.main_screen
            nodes = screen.query_one(NodesTable)
            cases = (("P", "nodes", "dgx7"), ("R", "nodes", "dgx6"),
                     ("x", "lanes", None), ("cluster picker", None, None))
            for _ in range(rounds):
                for key, pane, row in cases:
                    if pane is not None:
                        await pilot.press("1" if pane == "nodes" else "2")
                        if row is not None:
                            nodes.move_cursor(row=nodes.get_row_index(row))
                        await pilot.pause(0.05)
                    n_said = len(said)
                    t0 = time.perf_counter()
                    if key == "cluster picker":
                        app.pick_cluster("glm53-flash-eugr-2x")
                    else:
                        app._driver.send_message(events.Key(key, key))  # type: ignore[union-attr]
                    while len(said) == n_said or not stamps or stamps[-1] < said[n_said][0]:
                        await asyncio.sleep(0)
                    ack = stamps[-1] - t0
                    modal = (PickerScreen if key == "cluster picker" else ActionModal)
                    while not isinstance(app.screen, modal):
                        await asyncio.sleep(0.005)
                    t_modal = time.perf_counter()
                    while stamps[-1] < t_modal:
                        await asyncio.sleep(0.005)
                    shown = stamps[-1] - t0
                    times = out.setdefault(key, {"ack": [], "modal": []})
                    times["ack"].append(ack)
                    times["modal"].append(shown)
                    await pilot.press("escape")
                    while isinstance(app.screen, (ActionModal, PickerScreen)):
                        await pilot.press("escape")
                        await pilot.pause(0.05)
                    await pilot.pause(0.1)
    finally:
        setattr(NoticeLine, "say", original_say)  # noqa: B010
    return {key: {f"{what}_{stat}": 1000 * f(values) for what, values in times.items()
                  for stat, f in (("median", statistics.median), ("max", max))}
            for key, times in out.items()}


class CollectorPauses:
    """gc callback: how long each collector pass stalled the loop (ms)."""

    def __init__(self) -> None:
        self.ms: list[float] = []
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.ms.append(1000 * (time.perf_counter() - self._start))


# -- main -----------------------------------------------------------------------


def host_line() -> str:
    load = os.getloadavg()
    return (f"host: {platform.node()} {platform.machine()} {os.cpu_count()} CPU, "
            f"Python {platform.python_version()}, load {load[0]:.1f} {load[1]:.1f}; "
            f"console at {constants.MAX_FPS} frames/s")


async def run(args: argparse.Namespace) -> None:
    print(host_line())
    if args.ack:
        for key, t in (await key_to_ack(args.ack_rounds)).items():
            print(f"key-to-acknowledgement at 80x24, {key} (probes {SLOW_NET_S:g} s late): "
                  f"ack median {t['ack_median']:.1f} ms, max {t['ack_max']:.1f} ms; "
                  f"modal median {t['modal_median']:.0f} ms, max {t['modal_max']:.0f} ms "
                  f"({args.ack_rounds} presses)")
        return
    if not args.skip_sim:
        sim = SimChild(speed=60.0)
        try:
            config = sim.config()
            fp = await first_paint(config, args.runs)
            for what, values in fp.items():
                print(f"first paint, {what}: median {1000 * statistics.median(values):.0f} ms, "
                      f"max {1000 * max(values):.0f} ms ({len(values)} runs)")
            idle = await idle_cpu(config, args.idle_s)
            print(f"idle, 8 nodes at a {config.console.poll_interval_s:g} s poll: "
                  f"{idle['core_pct']:.2f} % of a core ({idle['cpu_s']:.2f} s CPU in "
                  f"{idle['wall_s']:.0f} s; {idle['nodes_polled']}/8 nodes polled)")
        finally:
            sim.close()
    if args.full_pass:
        kp = await key_to_paint(0, 1000.0, size=(80, 24), alerts_per_s=5.0,
                                passes=args.passes, pass_gap_s=args.pass_gap_s, key_gap_s=0.25)
        during = [f"{t:.0f}" for t in kp["during_ms"]]
        passes = [f"{t:.0f}" for t in kp["pass_ms"]]
        print(f"key-to-frame at 80x24, incident (log at 1,000 lines/s, 5 alerts/s), keys "
              f"every 0.25 s, a full pass every {args.pass_gap_s:g} s: other keys p50 "
              f"{kp['p50_ms']:.1f} ms, p99 {kp['p99_ms']:.1f} ms, max {kp['max_ms']:.1f} ms "
              f"({kp['keys']} keys); a key sent as a pass begins: {', '.join(during)} ms "
              f"(passes {', '.join(passes)} ms; the last the thaw)")
        return
    if args.incident:
        for label, kwargs in (("calm (no log, no alerts)", {"flood": False}),
                              ("incident (log at 1,000 lines/s, 5 alerts/s)",
                               {"alerts_per_s": 5.0})):
            kp = await key_to_paint(args.keys, 1000.0, size=(80, 24), **kwargs)  # type: ignore[arg-type]
            print(f"key-to-paint at 80x24, {label}: p50 {kp['p50_ms']:.1f} ms, "
                  f"p99 {kp['p99_ms']:.1f} ms, max {kp['max_ms']:.1f} ms ({kp['keys']} keys; "
                  f"{kp['lines_per_s']:,.0f} lines/s shown; {kp['gc_passes']:.0f} collector "
                  f"passes, longest {kp['gc_max_ms']:.0f} ms)")
        return
    for rate in args.rates:
        kp = await key_to_paint(args.keys, rate)
        offered = "as fast as it is taken" if not rate else f"offered at {rate:,.0f} lines/s"
        print(f"key-to-paint, boot log {offered} ({kp['lines_per_s']:,.0f} lines/s shown): "
              f"p50 {kp['p50_ms']:.1f} ms, p99 {kp['p99_ms']:.1f} ms, "
              f"max {kp['max_ms']:.1f} ms ({kp['keys']} keys)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="first-paint runs")
    parser.add_argument("--idle-s", type=float, default=30.0, help="idle window (s)")
    parser.add_argument("--keys", type=int, default=200, help="keys timed under the flood")
    parser.add_argument("--rates", type=float, nargs="+", default=[0.0, 1000.0],
                        help="boot-log rates to test, lines/s (0: as fast as taken)")
    parser.add_argument("--incident", action="store_true",
                        help="only key-to-paint at 80x24: calm vs the incident, one run")
    parser.add_argument("--full-pass", action="store_true",
                        help="only key-to-frame during the timed full pass vs outside, one run")
    parser.add_argument("--passes", type=int, default=6, help="full passes (--full-pass)")
    parser.add_argument("--pass-gap-s", type=float, default=10.0,
                        help="real seconds between full passes (--full-pass)")
    parser.add_argument("--ack", action="store_true",
                        help="only key-to-acknowledgement of the keys that wait on the network")
    parser.add_argument("--ack-rounds", type=int, default=5, help="presses per key (--ack)")
    parser.add_argument("--skip-sim", action="store_true",
                        help="only key-to-paint (no simulator child)")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
