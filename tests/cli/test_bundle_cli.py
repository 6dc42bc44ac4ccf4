"""`sparktui bundle` and `sparktui replay` as an operator runs them: a lane's
bundle from the command line (a running lane, read live), a recording read
for the console's held lines, and bad input named without a traceback."""

from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path

import pytest

from sparktui.service.events import LogLinesArrived

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]

B = "4nodes-switch-b"
LANE = "glm53-flash-eugr-2x"


async def test_bundle_of_a_running_lane(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        assert await h.sparktui(cfg, "serve", LANE, "--cluster", B, "--detach", "--yes",
                                monkeypatch=monkeypatch) == 0
        await sim.clock.sleep(300)
        capsys.readouterr()
        code = await h.sparktui(cfg, "bundle", LANE, "--lines", "50", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
    assert code == 0, err
    path = Path(out.strip().splitlines()[-1])
    assert path.parent == cfg.state_dir() / "bundles" and path.is_file()
    with tarfile.open(path) as tar:
        names = [m.name.split("/", 1)[1] for m in tar.getmembers()]
        summary = tar.extractfile(tar.getmembers()[0]).read().decode()  # type: ignore[union-attr]
        rank0 = tar.extractfile(  # type: ignore[union-attr]
            next(m for m in tar.getmembers() if m.name.endswith(f"{LANE}-r0-dgx5.log"))).read()
        plan_json = json.loads(tar.extractfile(  # type: ignore[union-attr]
            next(m for m in tar.getmembers() if m.name.endswith("/plan.json"))).read())
        kernel = tar.extractfile(  # type: ignore[union-attr]
            next(m for m in tar.getmembers() if m.name.endswith("/kernel/dgx5.log"))).read()
    assert names[0] == "SUMMARY.md" and f"# Incident: lane {LANE}" in summary
    # this command runs on wall time, the simulator on its own clock: two
    # timelines, each saying its clock, and the nodes' lines are not windowed
    # by a time on ours (the simulator's night is days behind this host's)
    ours = summary.index("## Timeline on wall clock (UTC): journal, polls, alerts")
    nodes = summary.index("## Timeline on the nodes' clocks")
    assert ours < nodes and "(wall clock (UTC))" in summary.splitlines()[2]
    assert "serve glm53-flash-eugr-2x began" in summary[ours:nodes]
    assert kernel.strip(), "the kernel journal was windowed on another clock"
    assert 0 < rank0.count(b"\n") <= 51  # --lines 50 (+ the trailing newline)
    assert "none found in the ranks' logs" in summary  # a healthy boot: nothing fatal
    assert {f"kernel/dgx{i}.log" for i in (5, 6, 7, 8)} <= set(names)
    # the plan and EVERY guard verdict that started the lane (not only the refusals):
    # the same verdicts, in order, as the serve's own plan
    verdicts = plan_json["guard_verdicts"]
    serve_wf = plan_json["serve"]["wf"]
    assert {v["wf"] for v in verdicts} >= {serve_wf}
    mine = [v for v in verdicts if v["wf"] == serve_wf]
    assert len(mine) > 20 and all(v["passed"] for v in mine)
    guards = {v["guard"] for v in mine}
    assert {"protected-node", "fit", "online", "kernel", "nas-mount", "hf-cache", "image",
            "node-busy", "port", "runlock"} <= guards
    steps = plan_json["serve"]["detail"]["plan"]  # the steps the operator confirmed
    assert steps and all(set(s) == {"step", "target", "action"} for s in steps)
    assert any(s["action"].startswith("docker run -d --name sparktui-") for s in steps)


async def test_bad_subjects_and_files_are_named(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg):
        code = await h.sparktui(cfg, "bundle", "no-such-lane", monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
    assert code == 2 and "'no-such-lane' is neither a node" in err and "Traceback" not in err
    code = await h.sparktui(cfg, "replay", str(tmp_path / "nothing.jsonl.gz"),
                            monkeypatch=monkeypatch)
    _, err = capsys.readouterr()
    assert code == 2 and "no such recording" in err
    junk = tmp_path / "junk.jsonl.gz"
    junk.write_bytes(b"not gzip at all")
    code = await h.sparktui(cfg, "replay", str(junk), monkeypatch=monkeypatch)
    _, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err


async def test_replay_refuses_a_bad_from_before_reading_and_says_what_was_damaged(
        tmp_path, capsys, monkeypatch):
    import gzip

    from sparktui.service import recorded, recording

    cfg = h.fleet(tmp_path)
    night = tmp_path / "night.jsonl.gz"
    good = {"t": 1764450000, "e": recording.encode(LogLinesArrived("lane", 0, (), 0))}
    night.write_bytes(gzip.compress(json.dumps(good).encode() + b"\n")
                      + b"\x1f\x8b\x08\0garbage" + gzip.compress(b'{"t": -1e18, "e": null}\n'))
    read = recorded.open_sessions

    def refuse(*a, **k):
        raise AssertionError("read before the flags were checked")

    from sparktui.cli import replay_cmd

    load = replay_cmd.load
    monkeypatch.setattr(recorded, "open_sessions", refuse)
    monkeypatch.setattr(replay_cmd, "load", refuse)  # nor the config
    for bad, said in (("yesterday-ish", "not a time"), ("+" + "9" * 400 + "h", "not an offset"),
                      ("+200h", "more than a week after the start")):
        with pytest.raises(SystemExit) as exit_:
            await h.sparktui(cfg, "replay", str(night), "--from", bad, monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
        assert exit_.value.code == 2 and "argument --from: " in err and said in err
        assert "Traceback" not in err
    monkeypatch.setattr(replay_cmd, "load", load)
    monkeypatch.setattr(recorded, "open_sessions", read)
    monkeypatch.setattr("sparktui.tui.replay.ReplayApp.run", lambda self: None)
    code = await h.sparktui(cfg, "replay", str(night), monkeypatch=monkeypatch)
    _, err = capsys.readouterr()
    assert code == 0
    assert "1 damaged piece skipped; 1 line that is not an event" in err


async def test_replay_names_lines_found_damaged_while_replaying(tmp_path, capsys, monkeypatch):
    """A line whose start is in the writer's form and whose body does not fit
    its schema is found when the replay decodes it: the console says so, and
    the command's last line names the file and the count."""
    import gzip

    from sparktui.service import recording

    cfg = h.fleet(tmp_path)
    night = tmp_path / "night.jsonl.gz"
    lines = []
    for i in range(3):
        data = {"t": 1764450000 + i, "e": recording.encode(LogLinesArrived("lane", 0, (), i))}
        if i == 1:
            data["e"]["end"] = "many"  # an int field
        lines.append(json.dumps(data, separators=(",", ":")))
    night.write_bytes(gzip.compress("\n".join(lines).encode()))

    def play(self) -> None:  # the replay reads its night to the end
        self.source.seek(self.source.last)

    monkeypatch.setattr("sparktui.tui.replay.ReplayApp.run", play)
    code = await h.sparktui(cfg, "replay", str(night), monkeypatch=monkeypatch)
    _, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err
    assert f"sparktui replay: {night}: 1 line that is not an event" in err


async def test_bundle_names_are_bounded_and_path_free_and_a_recipe_is_a_lane(
        tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    for bad in ("../config", "a/b", "x" * 300, ".hidden"):
        code = await h.sparktui(cfg, "bundle", bad, monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
        assert code == 2 and "is not a lane or node name" in err and "Traceback" not in err
    recipe = "dsv41-flash-sglang-4x"  # never served: only recipes/<name>/recipe.toml knows it
    assert (cfg.recipes_dir / recipe / "recipe.toml").is_file()
    async with h.published(cfg):
        code = await h.sparktui(cfg, "bundle", recipe, monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
    assert code == 0, err
    assert Path(out.strip().splitlines()[-1]).is_file()


async def test_a_bundle_dir_that_cannot_be_written_is_said_before_collecting(
        tmp_path, capsys, monkeypatch):
    from sparktui.ops import bundle

    cfg = h.fleet(tmp_path)
    cfg.state_dir().mkdir(parents=True, exist_ok=True)
    (cfg.state_dir() / "bundles").write_text("not a directory")

    async def collect(*a, **k):
        raise AssertionError("collected before the output was checked")

    monkeypatch.setattr(bundle, "_run", collect)
    code = await h.sparktui(cfg, "bundle", LANE, monkeypatch=monkeypatch)
    _, err = capsys.readouterr()
    assert code == 2 and "cannot write a bundle here" in err and "Traceback" not in err


async def test_replay_from_picks_the_session_by_recorded_time(tmp_path, capsys, monkeypatch):
    from sparktui.service.recorded import read_sessions
    from sparktui.service.recording import Recorder
    from sparktui.service.replay import ReplaySource

    class Clock:
        t = 1_764_450_000.0

        def time(self) -> float:
            return self.t

    cfg = h.fleet(tmp_path)
    night = tmp_path / "night.jsonl.gz"
    clock = Clock()
    for first in (clock.t + 3600, clock.t):  # the later run first in the file
        clock.t = first
        rec = Recorder(night, max_bytes=10_000_000, clock=clock)  # type: ignore[arg-type]
        rec.open()
        for i in range(20):
            clock.t = first + 60 * i
            rec.write(LogLinesArrived("lane", 0, (), i))
        rec.close()
    assert len(read_sessions(night)) == 2
    seen = {}
    monkeypatch.setattr("sparktui.tui.replay.ReplayApp.run",
                        lambda self: seen.setdefault("src", self.source))
    asked = 1_764_450_000.0 + 600
    when = __import__("time").strftime("%Y-%m-%dT%H:%M:%S", __import__("time").gmtime(asked))
    code = await h.sparktui(cfg, "replay", str(night), "--from", when, monkeypatch=monkeypatch)
    _, err = capsys.readouterr()
    src: ReplaySource = seen["src"]
    assert code == 0 and "holds 2 sessions" in err
    assert (src.now, src.first, src.last) == (asked, 1_764_450_000.0, 1_764_450_000.0 + 19 * 60)


def record_fatals(state_dir: Path, times: list[float], night: float | None = None) -> None:
    """The night file of ``night`` (the first time) in ``state_dir``: the lane's
    FATAL raised at each of ``times`` (epoch s)."""
    from sparktui.service.events import Alert, AlertRaised
    from sparktui.service.recording import Recorder, night_path

    class At:
        t = times[0]

        def time(self) -> float:
            return self.t

    clock = At()
    rec = Recorder(night_path(state_dir, times[0] if night is None else night),
                   max_bytes=10_000_000, clock=clock)  # type: ignore[arg-type]
    rec.open()
    for t in times:
        clock.t = t
        rec.write(AlertRaised(Alert(f"fatal:{LANE}", "fatal", LANE, ("CUDA out of memory",),
                                    "look")))
    rec.close()

async def test_bundle_from_the_record_with_the_cluster_unreachable(tmp_path, capsys, monkeypatch):
    import time

    cfg = h.fleet(tmp_path)  # the simulator is not running: nothing answers
    record_fatals(cfg.state_dir(), [time.time()] * 3)
    code = await h.sparktui(cfg, "bundle", LANE, monkeypatch=monkeypatch)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "the cluster is not reachable" in err and "Traceback" not in err
    with tarfile.open(out.strip().splitlines()[-1]) as tar:
        summary = tar.extractfile(tar.getmembers()[0]).read().decode()  # type: ignore[union-attr]
    assert "CUDA out of memory" in summary and "raised 3 times" in summary


async def test_replay_from_lands_on_the_asked_time_when_sessions_overlap(
        tmp_path, capsys, monkeypatch):
    """Two demo runs in one night file whose simulated clocks overlap (the
    second starts ten minutes into the first): `--from` a time only the first
    holds opens the first, a time both hold opens the later run, and each
    lands on the asked time; an offset counts from the later run's start."""
    import time

    from sparktui.service.recording import Recorder
    from sparktui.service.replay import ReplaySource

    class Clock:
        t = 1_764_450_000.0

        def time(self) -> float:
            return self.t

    t0 = Clock.t
    cfg = h.fleet(tmp_path)
    night = tmp_path / "night.jsonl.gz"
    clock = Clock()
    for first in (t0, t0 + 600):
        rec = Recorder(night, max_bytes=10_000_000, clock=clock)  # type: ignore[arg-type]
        clock.t = first
        rec.open()
        for i in range(20):
            clock.t = first + 60 * i
            rec.write(LogLinesArrived("lane", 0, (), i))
        rec.close()
    seen: dict[str, ReplaySource] = {}
    monkeypatch.setattr("sparktui.tui.replay.ReplayApp.run",
                        lambda self: seen.__setitem__("src", self.source))

    async def opened(when: str) -> ReplaySource:
        code = await h.sparktui(cfg, "replay", str(night), "--from", when,
                                monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
        assert code == 0 and "holds 2 sessions" in err and "Traceback" not in err
        return seen.pop("src")

    def utc(t: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))

    src = await opened(utc(t0 + 300))  # only the first run holds it
    assert (src.now, src.first, src.last) == (t0 + 300, t0, t0 + 19 * 60)
    src = await opened(utc(t0 + 900))  # both hold it: the later run
    assert (src.now, src.first, src.last) == (t0 + 900, t0 + 600, t0 + 600 + 19 * 60)
    src = await opened("+5m")
    assert (src.now, src.first) == (t0 + 900, t0 + 600)


async def test_bundle_with_no_node_answering_reaches_back_to_the_incident(
        tmp_path, capsys, monkeypatch):
    """The simulator has stopped (its endpoints file stays: every port is
    dead, as a cluster that is powered off): `sparktui bundle` still writes
    the bundle from the recording, names each source that did not answer,
    reaches back three hours to the lane's FATAL (past the default hour) and
    lists its 200 repeats once."""
    import time

    from sparktui.ops.bundle import DEFAULT_WINDOW_S

    assert DEFAULT_WINDOW_S < 3 * 3600
    cfg = h.fleet(tmp_path)
    async with h.published(cfg):
        pass  # the simulator stops; its endpoints stay published
    start = time.time() - 3 * 3600
    record_fatals(cfg.state_dir(), [start + 5 * (i + 1) for i in range(200)], night=start)
    code = await h.sparktui(cfg, "bundle", LANE, monkeypatch=monkeypatch)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err
    for node in ("dgx1", "dgx2"):
        assert f"not collected: {node}: the kernel journal could not be read" in err
    with tarfile.open(out.strip().splitlines()[-1]) as tar:
        summary = tar.extractfile(tar.getmembers()[0]).read().decode()  # type: ignore[union-attr]
    assert "raised 200 times" in summary
    assert summary.count("CUDA out of memory") == 1, summary
