"""The sentinel's parts without a cluster: the pid lock, the event lines
(one per change, staleness shown), the systemd unit and its verification."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from sparktui.cli.sentinel_cmd import _systemd_quote, install_unit, unit_text, verify_unit
from sparktui.core.advice import STALE_NEXT
from sparktui.core.config_load import load_config
from sparktui.core.state import NodeSnapshot, NodeState
from sparktui.core.thrash import ThrashLevel, ThrashVerdict
from sparktui.service.events import (
    Alert,
    AlertCleared,
    AlertRaised,
    LaneChanged,
    NodeSampled,
)
from sparktui.service.lanes import LaneView
from sparktui.service.sentinel import (
    INFO,
    WARNING,
    EventLines,
    PidLock,
    SentinelRunning,
    line_writer,
)

ROOT = Path(__file__).resolve().parents[2]


def test_one_sentinel_per_state_dir(tmp_path: Path) -> None:
    path = tmp_path / "state" / "sentinel.pid"
    first = PidLock(path)
    first.acquire()
    assert path.read_text() == f"{os.getpid()}\n"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    with pytest.raises(SentinelRunning, match=rf"a sentinel \(pid {os.getpid()}\) already"):
        PidLock(path).acquire()  # a second open file: flock refuses it
    first.release()
    assert not path.exists()
    again = PidLock(path)
    again.acquire()  # a lock left by a dead sentinel is no lock: flock died with it
    again.release()


def sampled(node: str, state: NodeState, at: float, last_ok: float | None,
            level: ThrashLevel = ThrashLevel.OK, evidence: tuple[str, ...] = ()) -> NodeSampled:
    snap = NodeSnapshot(node, state, at, error="" if state is NodeState.ONLINE else
                        "SSH probe timed out after 3 s", last_ok_at=last_ok)
    return NodeSampled(snap, ThrashVerdict(node, level, evidence, "", 0), None)


def texts(lines: EventLines, event: object) -> list[str]:
    return [t for _, t in lines.lines(event)]  # type: ignore[arg-type]


def test_node_lines_say_changes_and_staleness_once() -> None:
    lines = EventLines(poll_interval_s=2.0)
    assert texts(lines, sampled("dgx6", NodeState.ONLINE, 100.0, 100.0)) == ["node dgx6: online"]
    assert texts(lines, sampled("dgx6", NodeState.ONLINE, 102.0, 102.0)) == []
    pressure = sampled("dgx6", NodeState.ONLINE, 104.0, 104.0, ThrashLevel.PRESSURE,
                       ("PSI some avg10 12.0% >= 10%",))
    assert texts(lines, pressure) == [
        "memory dgx6: ok -> pressure (PSI some avg10 12.0% >= 10%)"]
    starved = sampled("dgx6", NodeState.STARVED, 107.0, 104.0, ThrashLevel.PRESSURE)
    assert texts(lines, starved) == ["node dgx6: online -> starved (SSH probe timed out after 3 s)"]
    stale = sampled("dgx6", NodeState.STARVED, 110.0, 104.0, ThrashLevel.PRESSURE)
    assert lines.lines(stale) == [(WARNING, f"node dgx6: stale, last good sample 6s ago -> "
                                            f"{STALE_NEXT}")]
    assert texts(lines, sampled("dgx6", NodeState.STARVED, 113.0, 104.0,
                                ThrashLevel.PRESSURE)) == []
    back = sampled("dgx6", NodeState.ONLINE, 115.0, 115.0)
    assert texts(lines, back) == ["node dgx6: starved -> online", "memory dgx6: pressure -> ok",
                                  "node dgx6: fresh again"]


def test_a_node_switched_off_is_not_stale() -> None:
    """Its plug says off: its state is known (the stale rule says the same)."""
    lines = EventLines(poll_interval_s=2.0)
    assert texts(lines, sampled("dgx4", NodeState.ONLINE, 100.0, 100.0)) == ["node dgx4: online"]
    off = NodeSampled(NodeSnapshot("dgx4", NodeState.POWERED_OFF, 110.0, last_ok_at=100.0),
                      None, None)
    assert texts(lines, off) == ["node dgx4: online -> powered_off"]
    assert texts(lines, dataclasses.replace(off, snapshot=dataclasses.replace(
        off.snapshot, taken_at=400.0))) == []


def test_an_alert_is_a_line_when_new_or_its_level_changes() -> None:
    lines = EventLines(poll_interval_s=2.0)
    a = Alert("thrash:dgx7", "thrash suspected", "dgx7", ("PSI full avg10 40.0% >= 20%",),
              "reduce load now")
    assert texts(lines, AlertRaised(a)) == [
        "ALERT thrash suspected dgx7: PSI full avg10 40.0% >= 20% -> reduce load now"]
    fresher = Alert(a.key, a.level, a.subject, ("PSI full avg10 45.0% >= 20%",), a.next_step)
    assert texts(lines, AlertRaised(fresher)) == []
    worse = Alert(a.key, "thrash", a.subject, ("ping answers, SSH probe failed 1x",), "retry")
    assert lines.lines(AlertRaised(worse))[0][0] < WARNING  # err: journald shows it red
    assert texts(lines, AlertCleared(a.key)) == ["cleared thrash:dgx7"]
    assert texts(lines, AlertRaised(a))  # raised again after it cleared


def test_lane_lines_phase_canary_and_stale_endpoint() -> None:
    lines = EventLines(poll_interval_s=2.0)
    view = LaneView("glm53-flash-eugr-2x", "2nodes-dac", "vllm", 8000, (), phase="loading weights")
    assert texts(lines, LaneChanged(view)) == ["lane glm53-flash-eugr-2x on 2nodes-dac: "
                                               "loading weights (no rank seen yet)"]
    serving = LaneView(view.name, view.cluster, "vllm", 8000, (), phase="serving", health="ok",
                       canary=("1-token completion answered in 0.05 s",))
    assert texts(lines, LaneChanged(serving)) == [
        "lane glm53-flash-eugr-2x: loading weights -> serving, health ok",
        "lane glm53-flash-eugr-2x canary: 1-token completion answered in 0.05 s"]
    dead = LaneView(view.name, view.cluster, "vllm", 8000, (), phase="unresponsive", health="ok",
                    canary=("/health answers 200 but a 1-token completion failed: no answer "
                            "in 10 s",), stale_s=None)
    got = lines.lines(LaneChanged(dead))
    assert got[0] == (WARNING, "lane glm53-flash-eugr-2x: serving -> unresponsive, health ok")
    stale = LaneView(view.name, view.cluster, "vllm", 8000, (), phase="unresponsive",
                     health="refused", canary=dead.canary, stale_s=31.0)
    assert texts(lines, LaneChanged(stale))[-1] == ("lane glm53-flash-eugr-2x: endpoint stale, "
                                                     "last good sample 31s ago")


def test_journal_lines_carry_the_priority_and_terminal_lines_the_time() -> None:
    out: list[str] = []

    class At:
        def time(self) -> float:
            return 1795989600.0

        def monotonic(self) -> float:
            return 0.0

        async def sleep(self, s: float) -> None: ...

    line_writer(True, At(), out.append)(WARNING, "ALERT x")
    line_writer(False, At(), out.append)(INFO, "node dgx1: online")
    assert out == ["<4>ALERT x", "2026-11-29T22:00:00Z node dgx1: online"]


def test_unit_runs_this_python_on_this_config() -> None:
    config = load_config(ROOT / "config.toml")
    text = unit_text(config, "/opt/spark tui/bin/python")
    exec_line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    assert exec_line == (f'ExecStart="/opt/spark tui/bin/python" -m sparktui --config '
                         f'{(ROOT / "config.toml").resolve()} sentinel')
    assert "WantedBy=default.target" in text and "KillSignal=SIGTERM" in text
    assert "TOKEN" not in text.upper()  # the Home Assistant token never goes in a unit
    assert _systemd_quote("/a/100%") == '"/a/100%%"'
    assert _systemd_quote('/a/"b"') == '"/a/\\"b\\""'


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_installed_unit_is_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = load_config(ROOT / "config.toml")
    assert install_unit(config, tmp_path) == 0
    out = capsys.readouterr().out
    assert "systemd-analyze verify: ok" in out
    assert "systemctl --user enable --now sparktui-sentinel.service" in out
    bad = tmp_path / "bad.service"
    bad.write_text("[Service]\nExecStart=relative/python -m sparktui sentinel\n")
    ok, said = verify_unit(bad)
    assert not ok and "relative/python" in said


def test_health_shows_the_age_a_running_sentinel_saw_last(tmp_path: Path) -> None:
    from sparktui.cli.health_cmd import HealthReport
    from sparktui.core.state import ClusterSnapshot
    from sparktui.ops import sentinel_state

    config = load_config(ROOT / "config.toml")
    config = dataclasses.replace(config, console=dataclasses.replace(
        config.console, state_dir=str(tmp_path)))
    now = 1795989600.0
    snaps = tuple(NodeSnapshot(n, NodeState.STARVED if n == "dgx6" else NodeState.ONLINE, now,
                               last_ok_at=None if n == "dgx6" else now) for n in config.nodes)
    cluster = ClusterSnapshot(now, snaps)
    assert HealthReport(config, cluster).stale == {}  # no sentinel: no history to show
    sentinel_state.write(tmp_path, sentinel_state.LastGood(
        os.getpid(), now - 1, {"dgx6": now - 252.0, "dgx7": now - 1}))
    report = HealthReport(config, cluster)
    assert report.stale == {"dgx6": 252.0}
    assert "last good sample 4m12s ago (sentinel)" in report.issues["dgx6"]
    assert report.as_json()["nodes"][5]["last_good_age_s"] == 252.0  # type: ignore[index]
    sentinel_state.write(tmp_path, sentinel_state.LastGood(
        2**22 + 12345, now - 1, {"dgx6": now - 252.0}))  # its writer is gone
    assert HealthReport(config, cluster).stale == {}


def test_lane_lines_name_every_node_of_the_lane() -> None:
    """The first line of a two-node lane names both nodes though only rank 0's
    container is seen yet (issue 30: it named one), and so do its alert and
    failure lines; a lane of a cluster the config does not know names the
    nodes its ranks were seen on."""
    from sparktui.watch.readiness import RankContainer
    r0, r1 = (RankContainer(i, n, f"sparktui-x-r{i}", 2, 8000, "vllm", True)
              for i, n in enumerate(("dgx5", "dgx6")))
    lines = EventLines(poll_interval_s=2.0, clusters={"2nodes": ("dgx5", "dgx6")})
    first = LaneView("x", "2nodes", "vllm", 8000, (r0,), phase="starting")
    assert texts(lines, LaneChanged(first)) == [
        "lane x on 2nodes (nodes dgx5, dgx6): starting (no rank seen yet on dgx6)"]
    both = dataclasses.replace(first, ranks=(r0, r1), phase="loading weights")
    assert texts(lines, LaneChanged(both)) == ["lane x: starting -> loading weights, health —"]
    dark = dataclasses.replace(both, ranks=(r0,))  # dgx6 stopped answering: still the lane's
    assert texts(lines, LaneChanged(dark)) == []
    failed = dataclasses.replace(dark, phase="failed", failure="rank 1: EngineDeadError")
    assert texts(lines, LaneChanged(failed)) == [
        "lane x: loading weights -> failed (nodes dgx5, dgx6), health —: rank 1: "
        "EngineDeadError"]
    alert = Alert("fatal:x", "fatal", "x", ("rank 1: EngineDeadError",), "stop the lane (x)")
    assert texts(lines, AlertRaised(alert)) == [
        "ALERT fatal x (nodes dgx5, dgx6): rank 1: EngineDeadError -> stop the lane (x)"]
    foreign = LaneView("y", "elsewhere", "vllm", 8001, (r1,), phase="starting")
    assert texts(lines, LaneChanged(foreign)) == ["lane y on elsewhere (node dgx6): starting"]
    assert texts(lines, LaneChanged(dataclasses.replace(foreign, ranks=(r0, r1)))) == [
        "lane y on elsewhere: ranks on dgx6, dgx5"]


def test_the_sentinel_names_the_nodes_of_its_configs_clusters(tmp_path: Path) -> None:
    from sparktui.core.config import ConsoleConfig
    from sparktui.service.sentinel import Sentinel
    from sparktui.watch.readiness import RankContainer
    config = dataclasses.replace(load_config(ROOT / "config.toml"),
                                 console=ConsoleConfig(state_dir=str(tmp_path / "state")))
    out: list[str] = []
    sentinel = Sentinel(config, object(), emit=lambda p, t: out.append(t),  # type: ignore[arg-type]
                        clock=None)
    r0 = RankContainer(0, "dgx5", "sparktui-x-r0", 4, 8000, "vllm", True)
    sentinel.on_event(LaneChanged(LaneView("x", "4nodes-switch-b", "vllm", 8000, (r0,))))
    assert out == ["lane x on 4nodes-switch-b (nodes dgx5, dgx6, dgx7, dgx8): starting "
                   "(no rank seen yet on dgx6, dgx7, dgx8)"]


def test_log_records_become_sentinel_lines_without_control_bytes() -> None:
    import logging

    from sparktui.service.sentinel import ERR, LogLines
    out: list[tuple[int, str]] = []
    with LogLines(lambda p, t: out.append((p, t))).installed():
        logging.getLogger("sparktui.service.night").warning(
            "phone alert not sent (%s): %s", "t", "HTTP 400: <html>\r\n\x1b[31mBad\x1b[0m")
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("sparktui.service.night").exception("bundle failed")
        logging.getLogger("sparktui.service.night").info("not a line")
    assert out[0] == (WARNING, "sentinel: phone alert not sent (t): HTTP 400: <html>\r\n"
                               "\x1b[31mBad\x1b[0m")  # the writer strips (line_writer)
    assert out[1] == (ERR, "sentinel: bundle failed")
    assert out[-1] == (ERR, "sentinel:   ValueError: boom") and len(out) > 3
    assert all(p == ERR for p, _ in out[1:])
    written: list[str] = []
    emit = line_writer(True, None, written.append)  # type: ignore[arg-type]
    for p, t in out:
        emit(p, t)
    assert written[0] == "<4>sentinel: phone alert not sent (t): HTTP 400: <html> Bad"
    assert not any(isinstance(h, LogLines) for h in logging.getLogger().handlers)
