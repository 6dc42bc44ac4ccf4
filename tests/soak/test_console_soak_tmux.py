"""The console for a quarter of an hour in a real terminal (issue 25: every
console died 600 s after start, and no test ran one for more than a minute
or two). `sparktui demo --speed 1` (the simulator at wall speed, so its poll
is the shipped 2 s, issue 7's setting) in tmux at 80x24 for SOAK_S of wall
time, past every timer the console sets (the full collection's 120 s, the
switches' 15 s, the canary's 60 s), with keys every KEYS_EVERY_S across
every pane and modal: panes 1-4 and tab, the serve picker through its
cluster picker to the confirm or refusal and cancelled, recover's typed
confirm cancelled, the palette, help, the alerts list. Each step checks the
console is alive, answers (the modal it opened shows) and shows no
traceback. Measured on the console's own process (psutil; the demo's
simulator runs in it too):

- resident memory after 12 min at most RSS_GROWTH_MAX x the first minute's;
- CPU while idle: process CPU seconds per wall second over QUIET_S with no
  key, at most IDLE_CPU_MAX. Issue 7's figure is ~3.5 % of a core at 8
  nodes / 2 s for the console alone (BENCHMARKS.md, "idle, 8 nodes at a 2 s
  poll": 2.65-3.55 % across rounds); here the simulator's SSH servers answer
  the same probes in the same process (~1 % more: 14.5 ms of server CPU a
  round, BENCHMARKS.md's poll table, every 2 s is 0.7 %), and the suite's
  other workers share the two cores beside it: CPU time is not wall time, but
  a contended host costs more CPU per probe (cache, frequency: BENCHMARKS
  saw the VM swing +-25 % within minutes). 3.5 + 1 = 4.5 %, x 1.5 for the
  contention: 7 %, still a bound a console that polls twice as often or
  spins on a timer fails.

The figures are printed in one line (`pytest -rP` shows it)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from ..tui.test_acceptance_tmux import ROOT, Terminal

SOAK_S = 12.5 * 60
KEYS_EVERY_S = 4.0
QUIET_FROM_S, QUIET_S = 330.0, 60.0
"""A minute with no key at 5.5-6.5 min: the idle CPU window."""
RSS_AT_S = (60.0, 360.0, 720.0)
RSS_GROWTH_MAX = 1.5
IDLE_CPU_MAX = 0.07
CONNECT_TIMEOUT_S = 3.0
"""As the acceptance test: the previews' probes wait at most this long."""


@dataclass
class Step:
    keys: tuple[str, ...]
    shows: Callable[[str], bool] | None = None
    """What the keys must bring on screen (a modal) before Escape closes it."""
    then: tuple[str, ...] = ()
    """Further keys once it shows (and what they bring, in order)."""
    then_shows: tuple[Callable[[str], bool], ...] = field(default_factory=tuple)


STEPS = [
    Step(("1", "j", "j", "k")),
    Step(("2",)),
    Step(("3", "f", "f")),
    Step(("4",)),
    Step(("Tab", "BTab")),
    Step(("?",), lambda s: "sparktui — keys" in s),
    Step(("s",), lambda s: "Serve which recipe?" in s, ("Enter",),
         (lambda s: "on which cluster?" in s,)),
    Step(("!",), lambda s: "Alerts" in s),
    Step((":",), lambda s: "Search for commands" in s),
    Step(("1", "R"), lambda s: "Recover dgx" in s or "REFUSED" in s),
    Step(("3",)),
    Step(("4", "1")),
]


@dataclass
class Figures:
    rss: dict[float, int] = field(default_factory=dict)
    idle_cpu: float | None = None
    steps: int = 0

    def line(self) -> str:
        mib = {at: rss / 2**20 for at, rss in self.rss.items()}
        first = mib.get(RSS_AT_S[0], float("nan"))
        last = mib.get(RSS_AT_S[-1], float("nan"))
        cpu = "not measured" if self.idle_cpu is None else f"{self.idle_cpu * 100:.2f} %"
        return ("console soak: RSS " + ", ".join(f"{at / 60:g} min {v:.1f} MiB"
                                                  for at, v in sorted(mib.items()))
                + f" (x{last / first:.2f}); idle CPU {cpu} of a core over {QUIET_S:g} s;"
                f" {self.steps} key steps in {SOAK_S / 60:g} min; "
                f"{psutil.cpu_count()} CPUs, load {psutil.getloadavg()[0]:.1f}")


@pytest.fixture
def console(tmp_path: Path, config_copy: Callable[..., Path]) -> Iterator[Terminal]:
    term = Terminal(f"sparktui-soak-{id(tmp_path)}")
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PYTHONPATH": str(ROOT / "src"), "TERM": "xterm-256color",
           "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}
    config = config_copy(lambda text: text.replace(
        "\nconnect_timeout_s = 10.0", f"\nconnect_timeout_s = {CONNECT_TIMEOUT_S:g}", 1)
        .replace('state_dir = "~/.local/state/sparktui"',
                 f'state_dir = "{tmp_path / "state"}"', 1))
    assert str(tmp_path / "state") in config.read_text()
    term.start([sys.executable, "-m", "sparktui", "--config", str(config), "demo",
                "--speed", "1"], env)
    try:
        yield term
    finally:
        term.close()


def _healthy(t: Terminal, what: str) -> str:
    if not t.alive():
        raise AssertionError(f"the console exited ({what})")
    screen = t.screen()
    assert "Traceback" not in screen, screen
    return screen


def _run(t: Terminal, step: Step) -> None:
    t.keys(*step.keys)
    if step.shows is None:
        return
    t.wait(f"{step.keys} showing", step.shows, timeout=60)
    for key, shows in zip(step.then, step.then_shows, strict=True):
        t.keys(key)
        t.wait(f"{key} showing", shows, timeout=90)
    for _ in range(1 + len(step.then)):
        t.keys("Escape")
        time.sleep(0.3)
    t.wait("back on the main screen", lambda s: "Serve which" not in s
           and "on which cluster?" not in s and "Search for commands" not in s
           and "esc close" not in s and "escape cancels" not in s
           and "esc ·" not in s, timeout=30)


@pytest.mark.timeout(1200)
def test_console_soak_twelve_minutes_in_tmux(console: Terminal) -> None:
    t = console
    t.wait("eight nodes online", lambda s: "8/8 online" in s, timeout=180)
    proc = psutil.Process(t.pid)
    start = time.monotonic()
    figures = Figures()
    quiet_cpu: float | None = None
    i = 0
    while (elapsed := time.monotonic() - start) < SOAK_S:
        for at in RSS_AT_S:
            if elapsed >= at and at not in figures.rss:
                figures.rss[at] = proc.memory_info().rss
        if QUIET_FROM_S <= elapsed < QUIET_FROM_S + QUIET_S:
            if quiet_cpu is None:
                cpu = proc.cpu_times()
                quiet_cpu, quiet_wall = cpu.user + cpu.system, time.monotonic()
            _healthy(t, "idle")
            time.sleep(2.0)
            continue
        if quiet_cpu is not None and figures.idle_cpu is None:
            cpu = proc.cpu_times()
            figures.idle_cpu = (cpu.user + cpu.system - quiet_cpu) / (time.monotonic()
                                                                      - quiet_wall)
        _healthy(t, f"step {i}")
        _run(t, STEPS[i % len(STEPS)])
        figures.steps += 1
        i += 1
        time.sleep(max(0.0, KEYS_EVERY_S - 0.5))
    _healthy(t, "the end")
    print(figures.line())
    assert figures.idle_cpu is not None and len(figures.rss) == len(RSS_AT_S)
    assert figures.rss[RSS_AT_S[-1]] <= RSS_GROWTH_MAX * figures.rss[RSS_AT_S[0]], \
        figures.line()
    assert figures.idle_cpu <= IDLE_CPU_MAX, figures.line()
    t.keys("q")
    end = time.monotonic() + 60
    while t.alive() and time.monotonic() < end:
        time.sleep(0.2)
    assert not t.alive(), "the console did not quit on q"
