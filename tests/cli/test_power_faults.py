"""Faults at every step of `sparktui power`, against the simulator: a refused
token, a proxy echoing the token, a journal that cannot be written, a journal
line with NaN. Each ends with the plug's true state known and nothing lost;
none gets the machine banned by Home Assistant's ip_ban."""

from __future__ import annotations

import errno
import importlib.util
import os
from pathlib import Path

import pytest

from sparktui.ops import journal as journal_mod

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]

pytestmark = pytest.mark.usefixtures("quick_polls")


def _journal_text(cfg) -> str:  # type: ignore[no-untyped-def]
    path = cfg.state_dir() / "journal.jsonl"
    return path.read_text() if path.exists() else ""


async def test_a_refused_token_is_one_request_and_ends_the_command(tmp_path, capsys,
                                                                   monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        sim.token_file.write_text("revoked-token-0123456789")
        before = sim.ha.requests
        code = await h.sparktui(cfg, "power", "cycle", "dgx7", "--yes",
                                monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code != 0
        assert "401 Unauthorized" in out + err and "long-lived access token" in out + err
        assert sim.ha.requests - before == 1, "a refused token was sent again"
        assert not sim.ha.banned and sim.ha.calls == []
        assert sim.nodes["dgx7"].power == "on"
        assert "revoked-token-0123456789" not in out + err + _journal_text(cfg)


async def test_a_502_echoing_the_token_never_shows_it(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        token = sim.token_file.read_text().strip()
        sim.inject("ha-502-echo")
        code = await h.sparktui(cfg, "power", "cycle", "dgx7", "--yes",
                                monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code != 0 and "HTTP 502" in out + err
        everything = out + err + _journal_text(cfg)
        assert token not in everything and "Bearer" not in everything
        assert sim.ha.calls == [] and sim.nodes["dgx7"].power == "on"
        code = await h.sparktui(cfg, "shiftlog", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert token not in out + err


@pytest.mark.parametrize(("err", "says"), [(errno.ENOSPC, "the disk is full"),
                                          (errno.EROFS, "the filesystem is read-only"),
                                          (errno.EACCES, "permission denied")])
async def test_a_full_or_read_only_journal_refuses_before_anything_is_switched(
        tmp_path, capsys, monkeypatch, err, says):
    cfg = h.fleet(tmp_path)

    def full(fd, data):  # type: ignore[no-untyped-def]
        raise OSError(err, os.strerror(err))

    async with h.published(cfg) as sim:
        monkeypatch.setattr(journal_mod, "_write", full)
        code = await h.sparktui(cfg, "power", "cycle", "dgx7", "--yes",
                                monkeypatch=monkeypatch)
        _, text = capsys.readouterr()
        assert code == 1
        assert "cannot write the journal" in text and says in text
        assert "refusing to act without a durable record" in text and "Traceback" not in text
        assert sim.ha.calls == [] and sim.nodes["dgx7"].power == "on"


async def test_a_nan_journal_line_does_not_brick_power_or_the_shift_log(tmp_path, capsys,
                                                                        monkeypatch):
    cfg = h.fleet(tmp_path)
    journal = cfg.state_dir() / "journal.jsonl"
    journal.parent.mkdir(parents=True, exist_ok=True)
    journal.write_bytes(b'{"t": NaN, "wf": "x", "kind": "begin", "workflow": "power-cycle"}\n'
                        b'{"t": 1e300, "wf": "y", "kind": "begin", "workflow": "stop"}\n')
    async with h.published(cfg) as sim:
        code = await h.sparktui(cfg, "power", "cycle", "dgx7", "--yes", "--off-seconds", "1",
                                monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        assert sim.ha.calls == [("turn_off", "switch.dgx7"), ("turn_on", "switch.dgx7")]
        code = await h.sparktui(cfg, "shiftlog", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "dgx7" in out
        code = await h.sparktui(cfg, "power", "resume", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0 and "no unfinished workflow" in out


def _disk_full_from(kind: str, step: str, real):  # type: ignore[no-untyped-def]
    """A `_write` for a disk that fills at the `kind` entry of `step`: every write
    from then on finds no space until the journal's reserve is released."""
    def write(fd, data):  # type: ignore[no-untyped-def]
        line = bytes(data)
        if not write.full and f'"kind":"{kind}"'.encode() in line \
                and f'"step":"{step}"'.encode() in line:
            write.full, write.had_reserve = True, write.reserve.exists()
        if write.full and (write.reserve.exists() or not write.had_reserve):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    write.full = write.had_reserve = False
    return write


@pytest.mark.parametrize(("kind", "step"), [("outcome", "plug off"), ("intent", "wait off"),
                                            ("intent", "plug on")])
async def test_a_disk_full_after_the_plug_went_off_restores_power_and_journals_it(
        tmp_path, capsys, monkeypatch, kind, step):
    """Disk full after the plug went off: the plug was turned back on without a
    journal line, so the journal and the shift log said it was left off. The
    reserve released at the full disk holds the way out."""
    cfg = h.fleet(tmp_path)
    real = journal_mod._write
    full = _disk_full_from(kind, step, real)
    full.reserve = cfg.state_dir() / journal_mod.RESERVE_FILE
    async with h.published(cfg) as sim:
        monkeypatch.setattr(journal_mod, "_write", full)
        code = await h.sparktui(cfg, "power", "cycle", "dgx7", "--yes", "--off-seconds", "1",
                                "--hard", monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
        assert code == 1 and "Traceback" not in err
        assert full.full and full.had_reserve and not full.reserve.exists()
        assert "the disk is full" in err, err
        assert sim.ha.calls == [("turn_off", "switch.dgx7"), ("turn_on", "switch.dgx7")]
        assert sim.spec.entities["switch.dgx7"].state == "on"
        journal = journal_mod.Journal.in_state_dir(cfg.state_dir())
        (rec,) = journal.workflows()
        # every plug change is on disk, confirmed, and the workflow went no further
        assert [(s.step, s.ok) for s in rec.steps if s.step.startswith("plug")] == \
            [("plug off", True), ("plug on", True)]
        assert rec.finished and not rec.ok and not journal.unfinished()
        assert "liveness" not in [s.step for s in rec.steps]  # no step past the way out
        code = await h.sparktui(cfg, "shiftlog", monkeypatch=monkeypatch)
        out, _ = capsys.readouterr()
        assert code == 0 and "still OFF" not in out and "Unfinished" not in out
        assert "power-cycle dgx7 **FAILED** via HA (off " in out, out


async def test_no_room_for_the_journal_reserve_refuses_before_anything_is_switched(
        tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)

    def nearly_full(fd, offset, length):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    async with h.published(cfg) as sim:
        monkeypatch.setattr(journal_mod, "_allocate", nearly_full)
        code = await h.sparktui(cfg, "power", "cycle", "dgx7", "--yes", "--off-seconds", "1",
                                monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
        assert code == 1 and "Traceback" not in err
        assert "cannot reserve 256 KiB for the journal" in err and "the disk is full" in err
        assert sim.ha.calls == [] and sim.nodes["dgx7"].power == "on"
        assert not (cfg.state_dir() / journal_mod.RESERVE_FILE).exists()
        (rec,) = journal_mod.Journal.in_state_dir(cfg.state_dir()).workflows()
        assert rec.finished and not rec.ok and not rec.steps


async def test_kill_9_during_the_off_wait_then_resume_honours_the_off_time(tmp_path, capsys,
                                                                           monkeypatch):
    import asyncio
    import signal
    import subprocess
    import sys

    # the off time is spent in real time (once by the killed cycle, the rest by the
    # resume): long enough that the kill lands inside it and that a resume which
    # did not wait would fall short of it, even on a loaded host
    OFF_S = 6
    cfg = h.fleet(tmp_path)
    journal = journal_mod.Journal.in_state_dir(cfg.state_dir())
    async with h.published(cfg) as sim:
        src = Path(__file__).resolve().parents[2] / "src"
        env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_HA_TOKEN"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "sparktui", "--config", str(cfg.path), "power", "cycle",
             "dgx7", "--yes", "--off-seconds", str(OFF_S)],
            env={**env, "PYTHONPATH": str(src)}, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(1200):
                recs = journal.unfinished()
                if recs and any(s.step == "wait off" for s in recs[0].steps):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the cycle never reached its off wait")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert sim.nodes["dgx7"].power == "off"
        (killed,) = journal.unfinished()
        off_at = next(s.finished_at for s in killed.steps if s.step == "plug off")
        code = await h.sparktui(cfg, "power", "resume", killed.wf, "--yes",
                                monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
        assert code == 0, err
        assert (f"s more with the plug off (the cycle asked {OFF_S} s off), turn it back on; "
                f"if it reads on, dgx7 was told to shut down" in err), err
        assert sim.nodes["dgx7"].power == "on"
        resumed = next(w for w in journal.workflows() if w.workflow == "resume")
        on_at = next(s.finished_at for s in resumed.steps if s.step == "plug on" and s.ok)
        assert [s.step for s in resumed.steps][:3] == ["plug read", "wait off", "plug on"]
        assert on_at - off_at >= OFF_S, f"off only {on_at - off_at:.1f} s"
        assert not journal.unfinished()
        # the shift log tells the off time from the confirmations, nothing unfinished
        assert await h.sparktui(cfg, "shiftlog", monkeypatch=monkeypatch) == 0
        out, _ = capsys.readouterr()
        assert "Unfinished" not in out, out
        cycle = next(line for line in out.splitlines() if "power-cycle dgx7" in line)
        assert "→ on at" in cycle and f"by {resumed.wf})" in cycle, cycle
        assert f"resume {killed.wf}: done" in out and "(off " in out, out


async def test_health_with_a_refused_token_sends_one_request(tmp_path, capsys, monkeypatch,
                                                             caplog):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        sim.token_file.write_text("revoked-token-9876543210")
        before = sim.ha.requests
        await h.sparktui(cfg, "health", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert sim.ha.requests - before == 1 and not sim.ha.banned
        assert "revoked-token-9876543210" not in out + err and "Traceback" not in err
        said = [r.getMessage() for r in caplog.records if "401" in r.getMessage()]
        assert len(said) == 1 and said[0].startswith("plug states unknown: GET")
        assert "long-lived access token" in said[0]


async def _signal_at(cfg, step: str, sig: str, *argv: str) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    """Run `sparktui --config CFG ARGV...` as a process, send it `sig` once the
    journal shows `step` started; its exit code and stderr."""
    import asyncio
    import signal
    import sys

    journal = journal_mod.Journal.in_state_dir(cfg.state_dir())
    src = Path(__file__).resolve().parents[2] / "src"
    env = {k: v for k, v in os.environ.items() if k != "SPARKTUI_HA_TOKEN"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sparktui", "--config", str(cfg.path), *argv,
        env={**env, "PYTHONPATH": str(src)}, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(60):
            while not any(e.step == step for e in journal.entries()):
                await asyncio.sleep(0.05)
        proc.send_signal(getattr(signal, sig))
        async with asyncio.timeout(60):
            _, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, err.decode()


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
async def test_ctrl_c_or_sigterm_during_the_off_wait_prints_the_plug_and_the_resume_command(
        tmp_path, sig):
    cfg = h.fleet(tmp_path)
    journal = journal_mod.Journal.in_state_dir(cfg.state_dir())
    async with h.published(cfg) as sim:
        code, text = await _signal_at(cfg, "wait off", sig, "power", "cycle", "dgx7", "--yes",
                                      "--off-seconds", "600")
        (record,) = journal.unfinished()
        assert code == (130 if sig == "SIGINT" else 143), text
        assert ("switch.dgx7 reads off (re-read now): dgx7 may be left without power -> "
                f"`sparktui power resume {record.wf}`") in text
        assert "Traceback" not in text
        assert sim.spec.entities["switch.dgx7"].state == "off"


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
async def test_ctrl_c_or_sigterm_while_a_cluster_boots_prints_each_plug_and_the_command(
        tmp_path, sig):
    cfg = h.fleet(tmp_path)
    cluster = "4nodes-switch-b"
    async with h.published(cfg, scenario="switch-off", speed=1.0) as sim:
        # the nodes dark, so the signal comes while they boot (their plugs on, 45 s to
        # live): with them already up every step passed in the 50 ms between two
        # reads of the journal, and a loaded host signalled a command that had ended
        for n in ("dgx5", "dgx6", "dgx7", "dgx8"):
            sim.ha.switch(f"switch.{n}", False)
        await sim.settle()
        code, text = await _signal_at(cfg, "liveness", sig, "power", "cluster", "on", cluster,
                                      "--yes")
        assert code == (130 if sig == "SIGINT" else 143), text
        for n in ("dgx5", "dgx6", "dgx7", "dgx8"):
            assert (f"switch.{n} reads on (re-read now) -> to finish: "
                    f"`sparktui power cluster on {cluster}`") in text, text
            assert sim.spec.entities[f"switch.{n}"].state == "on"
        assert "Traceback" not in text
