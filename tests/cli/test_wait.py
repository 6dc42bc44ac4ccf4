"""`sparktui wait`: duration parsing, verdict text, exit codes, registration."""

from __future__ import annotations

import argparse

import pytest

from sparktui.cli.main import build_parser
from sparktui.cli.wait_cmd import EXIT, _phase_printer, describe, parse_duration
from sparktui.core.failure import Failure
from sparktui.core.logsig import Kind, Phase
from sparktui.core.phases import PhaseTracker
from sparktui.watch.lane import BarRedrawn
from sparktui.watch.readiness import Outcome, WaitResult


@pytest.mark.parametrize(("text", "seconds"), [
    ("900", 900), ("900s", 900), ("15m", 900), ("1h30m", 5400), ("2h", 7200), ("0.5m", 30),
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "0", "-5", "5x", "m"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration(text)


def test_wait_is_registered_with_its_options() -> None:
    args = build_parser().parse_args(["wait", "glm53", "--stall-after", "20m"])
    assert args.lane == "glm53" and args.stall_after == 1200 and callable(args.func)
    assert build_parser().parse_args(["wait", "x"]).stall_after is None


def test_exit_codes() -> None:
    assert EXIT == {Outcome.READY: 0, Outcome.FAILED: 1, Outcome.STALLED: 2, Outcome.STOPPED: 1}


def result(outcome: Outcome, **kw: object) -> WaitResult:
    base = dict(lane="m", outcome=outcome, stages={}, phase_times={Phase.STARTING: 0.0},
                failure=None, last_progress="watch started", summary="")
    base.update(kw)
    return WaitResult(**base)  # type: ignore[arg-type]


def test_describe_ready_lists_stage_times() -> None:
    text = describe(result(Outcome.READY, stages={"port": 2400.0, "health": 2402.5,
                                                  "models": 2403.0, "first token": 2404.2}))
    assert text == "m: ready (port 40m00s, health 40m02s, models 40m03s, first token 40m04s)"


def test_describe_failed_names_rank_and_first_fatal_line() -> None:
    f = Failure(6, Kind.HF_ENTRY_MISSING, "LocalEntryNotFoundError: Cannot find", None,
                ("a", "b"))
    text = describe(result(Outcome.FAILED, failure=f))
    assert text.splitlines() == ["m: failed on rank 6: LocalEntryNotFoundError: Cannot find",
                                 "    | a", "    | b"]


def test_describe_stalled_gives_last_progress_what_runs_and_what_stops_it() -> None:
    text = describe(result(Outcome.STALLED, last_progress="shard 10/141",
                           ranks={0: "running", 1: "exited (137)"}))
    assert text.splitlines() == [
        "m: stalled; last progress: shard 10/141",
        "    ranks still running: r0; r1 exited (137)",
        "    wait does not stop anything: the ranks keep running; `sparktui stop m` stops them"]


def test_describe_failed_with_cause() -> None:
    f = Failure(0, Kind.ENGINE_FAILED, "EngineCore failed to start.", None, (),
                cause="ValueError: To serve at least one request ...")
    text = describe(result(Outcome.FAILED, failure=f))
    assert text.splitlines()[:2] == ["m: failed on rank 0: EngineCore failed to start.",
                                     "    cause: ValueError: To serve at least one request ..."]


def test_a_held_bars_redraw_prints_the_load_at_each_further_tenth(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A bar's redraw read before its line ends (watch/lane.BarRedrawn) moves
    the printed load as a line would."""
    tracker = PhaseTracker("m", stall_after_s=600.0, start=0.0)
    watch = argparse.Namespace(tracker=tracker, clock=argparse.Namespace(monotonic=lambda: 60.0))
    printer = _phase_printer(watch)  # type: ignore[arg-type]
    for n in (0, 1000, 1200, 4000):
        assert tracker.feed_redraw(0, f"\rLoading safetensors using InstantTensor: "
                                   f"{n // 90:3d}% Completed | {n}/9000 [00:10<09:50, 15.00it/s]",
                                   float(n), "2026-12-02T01:03:03.202000000Z")
        printer(BarRedrawn("m", 0, "dgx1"))
    out = capsys.readouterr().out.splitlines()
    assert [line.split("tensor ")[1].split(" ")[0] for line in out] == ["0/9000", "1000/9000",
                                                                         "4000/9000"]
