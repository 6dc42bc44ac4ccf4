"""Faults at every step of `sparktui power`, against the simulator: a refused
token, a proxy echoing the token, a journal that cannot be written, a journal
line with NaN. Each ends with the plug's true state known and nothing lost;
none gets the machine banned by Home Assistant's ip_ban."""

from __future__ import annotations

import errno
import importlib.util
import os
from pathlib import Path

from sparktui.ops import journal as journal_mod

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]


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


async def test_a_full_disk_refuses_before_anything_is_switched(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)

    def full(fd, data):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    async with h.published(cfg) as sim:
        monkeypatch.setattr(journal_mod, "_write", full)
        code = await h.sparktui(cfg, "power", "cycle", "dgx7", "--yes",
                                monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
        assert code == 1
        assert "cannot write the journal" in err and "the disk is full" in err
        assert "Traceback" not in err
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
