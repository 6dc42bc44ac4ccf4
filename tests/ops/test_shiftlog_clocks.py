"""One clock per comparison in the shift log and the resume offers (issue 25):
a demo's power cycle, stamped on its simulator's clock, killed with its plug
off and resumed from a shell on wall time, read "off 1h57m" after a 35 s off:
the plug-off's simulated time was subtracted from the resume's wall time. An
age or duration is taken on one clock only; across two the text says so, and
a resume that cannot measure how long a plug has been off owes the full off
time rather than none."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from sparktui.core.config_load import load_config
from sparktui.ops.context import OpsContext
from sparktui.ops.journal import Journal
from sparktui.ops.resume import offers
from sparktui.ops.shiftlog import render
from sparktui.sim.clock import DEFAULT_EPOCH

from ..fixtures.clocks import SimAt as Sim
from ..fixtures.clocks import WallAt as Wall

ROOT = Path(__file__).resolve().parents[2]
SIM0 = DEFAULT_EPOCH  # 2026-11-29T22:00:00 on the simulator's clock
WALL0 = 1_796_300_000.0  # 2026-12-03T12:13:20 UTC: the shell, days ahead
OFF_S = 35


def killed_cycle(path: Path, sim: Sim, wf: str, **detail: Any) -> Journal:
    """A demo's cycle of dgx6 killed in its off wait (plug confirmed off)."""
    j = Journal(path, sim)
    j.append(wf, "begin", workflow="power-cycle", target="dgx6",
             detail={"off_seconds": OFF_S, **detail})
    j.append(wf, "intent", workflow="power-cycle", target="switch.dgx6", step="plug off")
    sim.t += 1
    j.append(wf, "outcome", target="switch.dgx6", step="plug off", ok=True)
    j.append(wf, "intent", workflow="power-cycle", target="dgx6", step="wait off")
    return j


def resumed(path: Path, clock: Any, wf: str, by: str) -> None:
    """A resume of `wf` that read the plug off and turned it back on."""
    j = Journal(path, clock)
    j.append(by, "begin", workflow="resume", target=wf, detail={"resumes": wf})
    j.append(by, "intent", step="plug read", target="switch.dgx6")
    j.append(by, "outcome", step="plug read", target="switch.dgx6", ok=True,
             detail={"state": "off"})
    j.append(by, "intent", step="plug on", target="switch.dgx6")
    clock.t += 1
    j.append(by, "outcome", step="plug on", target="switch.dgx6", ok=True)
    j.append(wf, "end", workflow="power-cycle", target="dgx6", ok=False,
             message=f"completed by {by}")
    j.append(by, "end", workflow="resume", target=wf, ok=True, message="dgx6 back")


def test_a_demos_cycle_resumed_from_a_shell_claims_no_off_time(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    sim = Sim(SIM0)
    killed_cycle(path, sim, "p-sim")
    resumed(path, Wall(WALL0), "p-sim", "r-wall")
    sim.t += 600  # the same demo cycles again and resumes itself: one clock
    killed_cycle(path, sim, "p-again")
    sim.t += OFF_S
    resumed(path, sim, "p-again", "r-sim")
    text = render(Journal(path).entries())
    assert "Two clocks in this journal" in text, text
    lines = text.splitlines()
    cycle = next(x for x in lines if "power-cycle dgx6" in x and "r-wall" in x)
    assert "(off at 22:00 sim → on at 12:13 wall by r-wall; how long off is not known" \
        in cycle, cycle
    assert "finished 12:13 wall (its duration not known" in cycle, cycle
    resume = next(x for x in lines if "resume p-sim" in x)
    assert "off since 22:00 sim by p-sim; how long is not known" in resume, resume
    again = next(x for x in lines if "power-cycle dgx6" in x and "r-sim" in x)
    assert f"(off {OFF_S + 1}s → on at 22:10 sim by r-sim)" in again, again
    assert not any(w in text for w in ("3d", "2d", "1h", "h5")), text


def test_an_age_window_is_taken_on_each_clock(tmp_path: Path) -> None:
    """`--since 12h`: twelve hours of the wall clock for the shell's entries,
    and of the simulator's for the demo's (back from its latest entry, the
    only now of that clock known here), not twelve wall hours back over
    entries stamped days behind them."""
    path = tmp_path / "journal.jsonl"
    for wf, at in (("old-sim", SIM0 - 13 * 3600), ("new-sim", SIM0)):
        Journal(path, Sim(at)).append(wf, "begin", workflow="stop", target=wf)
        Journal(path, Sim(at)).append(wf, "end", workflow="stop", target=wf, ok=True,
                                      message="stopped")
    for wf, at in (("old-wall", WALL0 - 13 * 3600), ("new-wall", WALL0 - 60)):
        Journal(path, Wall(at)).append(wf, "begin", workflow="stop", target=wf)
        Journal(path, Wall(at)).append(wf, "end", workflow="stop", target=wf, ok=True,
                                       message="stopped")
    text = render(Journal(path).entries(), ago=12 * 3600, now=WALL0, clock="")
    assert "stop new-sim" in text and "stop new-wall" in text, text
    assert "old-sim" not in text and "old-wall" not in text, text
    assert "whose now is not known here" in text


async def test_the_shiftlog_command_windows_each_clock(tmp_path: Path, capsys,
                                                       monkeypatch) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("cli_harness",
                                                  Path(__file__).parent / "cli_harness.py")
    h = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(h)  # type: ignore[union-attr]
    cfg = h.fleet(tmp_path)
    path = cfg.state_dir() / "journal.jsonl"
    Journal(path, Sim(SIM0)).append("demo-stop", "begin", workflow="stop", target="lane")
    Journal(path, Sim(SIM0 + 5)).append("demo-stop", "end", workflow="stop", target="lane",
                                        ok=True, message="stopped")
    assert await h.sparktui(cfg, "shiftlog", "--since", "12h", monkeypatch=monkeypatch) == 0
    out = capsys.readouterr().out
    assert "stop lane: done" in out, out  # the demo's last 12 h of its own clock


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def ctx_on(journal: Journal, clock: Any) -> OpsContext:
    async def nothing(*_: Any) -> Any:
        raise AssertionError("not used")

    return OpsContext(config=load_config(ROOT / "config.toml"), link=nothing,  # type: ignore[arg-type]
                      power=None, power_error="none", snapshot=nothing, alive=nothing,
                      api_host=lambda n: "127.0.0.1", journal=journal,
                      locks=None,  # type: ignore[arg-type]
                      clock=clock, emit=lambda _ev: None)


def test_an_offer_of_a_demos_cycle_read_on_wall_time(tmp_path: Path) -> None:
    """Offered on wall time, the demo's killed cycle is not "began 3d14h ago"
    and its plug not "off long enough": its off time began on the simulator's
    clock, so the resume owes the cycle's full off time."""
    path = tmp_path / "journal.jsonl"
    killed_cycle(path, Sim(SIM0), "p-sim", pid=dead_pid(), pid_started=time.time() - 1)
    (offer,) = offers(Journal(path), ctx_on(Journal(path), Wall(WALL0)))
    assert "began 22:00:00 on the simulator's clock" in offer.what, offer.what
    assert " ago" not in offer.what, offer.what
    assert (f"wait {OFF_S} s with the plug off (the cycle asked {OFF_S} s off; it went off "
            f"on the simulator's clock") in offer.action, offer.action
    # on its own clock the same record is aged and its wait measured
    sim = Sim(SIM0 + 21)
    (same,) = offers(Journal(path), ctx_on(Journal(path, sim), sim))
    assert "began 21 s ago" in same.what, same.what
    assert f"wait {OFF_S - 20} s more with the plug off" in same.action, same.action
