"""`sparktui shiftlog`: the journal as the seeds' markdown night log."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

from sparktui.cli.shiftlog_cmd import parse_since
from sparktui.ops.journal import Journal
from sparktui.ops.shiftlog import render

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]

T0 = 1_789_741_260.0  # 2026-09-18 14:21 UTC


class At:
    def __init__(self) -> None:
        self.t = T0

    def time(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += s


def night(path: Path) -> Journal:
    """The seeds' 09-18 night, as the workflows would have journaled it."""
    clock = At()
    j = Journal(path, clock)
    j.append("s1", "begin", workflow="serve", target="glm53-full-mxfp4-4x-dspark8",
             detail={"recipe": "glm53-full-mxfp4-4x-dspark8", "cluster": "4nodes-switch-b"})
    clock.t += 73 * 60
    j.append("s1", "end", workflow="serve", target="glm53-full-mxfp4-4x-dspark8", ok=True,
             message="serving", detail={
                 "phases": {"starting": 0.0, "loading weights": 30.0, "KV allocation": 2880.0,
                            "graph capture": 2940.0, "API starting": 2994.0,
                            "serving": 3000.0},
                 "kv_tokens": 145664, "kv_max_len": 131072, "kv_concurrency": 1.11,
                 "stages": {"port": 3001.0, "health": 3002.0, "first token": 3010.0}})
    clock.t += 600
    j.append("s2", "begin", workflow="serve", target="dsv41-flash-8x",
             detail={"recipe": "dsv41-flash-8x", "cluster": "8nodes-switch"})
    clock.t += 180
    j.append("s2", "end", workflow="serve", target="dsv41-flash-8x", ok=False,
             message="dsv41-flash-8x: failed on rank 5: LocalEntryNotFoundError (ranks stopped)",
             detail={"failure": {"rank": 5, "kind": "exception",
                                 "line": "huggingface_hub.errors.LocalEntryNotFoundError: "
                                         "Cannot find an appropriate cached snapshot folder"}})
    clock.t += 60
    j.append("r1", "begin", workflow="serve", target="dsv41-flash-r37-4x-eager")
    j.append("r1", "refused", workflow="serve", target="dsv41-flash-r37-4x-eager")
    j.append("r1", "end", workflow="serve", target="dsv41-flash-r37-4x-eager", ok=False,
             message="refused", detail={"refused": [
                 {"guard": "fit", "message": "127.6 GB/node + process > 121.6 GiB"}]})
    clock.t += 60
    j.append("p1", "begin", workflow="power-cycle", target="dgx6", detail={"off_seconds": 35})
    j.append("p1", "intent", step="plug off", target="switch.dgx6")
    j.append("p1", "outcome", step="plug off", target="switch.dgx6", ok=True)
    clock.t += 37
    j.append("p1", "intent", step="plug on", target="switch.dgx6")
    j.append("p1", "outcome", step="plug on", target="switch.dgx6", ok=True)
    clock.t += 28
    j.append("p1", "end", workflow="power-cycle", target="dgx6", ok=True,
             message="dgx6 back: kernel 6.17.0-1031-nvidia")
    j.append("p2", "begin", workflow="power-cycle", target="dgx7", detail={"off_seconds": 35})
    j.append("p2", "intent", step="plug off", target="switch.dgx7")
    return j


def test_the_night_log_in_the_seeds_style(tmp_path):
    text = render(night(tmp_path / "j.jsonl").entries())
    assert text.startswith("# Night log — 2026-09-18\n")
    assert ("- **glm53-full-mxfp4-4x-dspark8 on 4nodes-switch-b** (14:21 → 15:34 UTC, "
            "1h13m): **up**.") in text
    assert "Phases: loading weights 47m30s, KV allocation 1m00s, graph capture 54s" in text
    assert "KV pool **145,664 tokens @128K (1.11x)**." in text
    assert "**FAILED** on rank 5: `huggingface_hub.errors.LocalEntryNotFoundError" in text
    assert ("power-cycled dgx6 via HA (off 37s → on at 15:49), finished 15:50 (1m05s): "
            "dgx6 back") in text
    assert "## Refusals (guards)" in text and "127.6 GB/node + process" in text
    assert "serve dsv41-flash-r37-4x-eager **REFUSED**:" in text
    assert "## Unfinished — needs the operator" in text
    assert "power-cycle dgx7" in text and "plug off [switch.dgx7] in doubt" in text


async def test_shiftlog_command_with_since(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    night(cfg.state_dir() / "journal.jsonl")
    assert await h.sparktui(cfg, "shiftlog", monkeypatch=monkeypatch) == 0
    assert "KV pool **145,664 tokens" in capsys.readouterr().out
    assert await h.sparktui(cfg, "shiftlog", "--since", "2026-09-18T15:40",
                            monkeypatch=monkeypatch) == 0
    out = capsys.readouterr().out
    assert "glm53-full-mxfp4" not in out and "dsv41-flash-8x" in out
    assert await h.sparktui(cfg, "shiftlog", "--since", "2030-01-01",
                            monkeypatch=monkeypatch) == 0
    assert "Nothing happened" in capsys.readouterr().out


def test_parse_since():
    assert parse_since("90m", now=10_000.0) == 10_000.0 - 5400
    assert parse_since("2026-09-18T14:21") == T0
    with pytest.raises(argparse.ArgumentTypeError):
        parse_since("yesterday")


def test_the_shift_log_tells_what_happened_not_the_plan(tmp_path):
    clock = At()
    j = Journal(tmp_path / "j.jsonl", clock)
    # an attempt that switched nothing (Home Assistant refused the token)
    j.append("a1", "begin", workflow="power-cycle", target="dgx5", detail={"off_seconds": 30})
    j.append("a1", "intent", step="plug off", target="switch.dgx5")
    j.append("a1", "outcome", step="plug off", target="switch.dgx5", ok=False, message="401")
    clock.t += 2
    j.append("a1", "end", workflow="power-cycle", target="dgx5", ok=False, message="401")
    # a cycle killed during its off wait, completed 19 minutes later by a resume
    clock.t += 60
    j.append("k1", "begin", workflow="power-cycle", target="dgx7", detail={"off_seconds": 30})
    j.append("k1", "intent", step="plug off", target="switch.dgx7")
    clock.t += 1
    j.append("k1", "outcome", step="plug off", target="switch.dgx7", ok=True)
    j.append("k1", "intent", step="wait off", target="dgx7")
    clock.t += 19 * 60
    j.append("r1", "begin", workflow="resume", target="k1", detail={"resumes": "k1"})
    j.append("r1", "intent", step="plug on", target="switch.dgx7")
    clock.t += 1
    j.append("r1", "outcome", step="plug on", target="switch.dgx7", ok=True)
    j.append("k1", "end", workflow="power-cycle", target="dgx7", ok=False,
             message="completed by r1")
    j.append("r1", "end", workflow="resume", target="k1", ok=True, message="dgx7 back")
    # a cluster power-off that switched a shared switch and failed on a node plug
    j.append("c1", "begin", workflow="cluster-power-off", target="8nodes-switch",
             detail={"nodes": ["dgx5"], "switches": ["switch.sw6_mt"]})
    j.append("c1", "intent", step="plug off", target="switch.dgx5")
    j.append("c1", "outcome", step="plug off", target="switch.dgx5", ok=True)
    j.append("c1", "intent", step="switch off", target="switch.sw6_mt")
    j.append("c1", "outcome", step="switch off", target="switch.sw6_mt", ok=True)
    j.append("c1", "end", workflow="cluster-power-off", target="8nodes-switch", ok=False,
             message="dgx6 plug unavailable")
    text = render(j.entries())
    assert "- 14:21 power-cycle dgx5: **FAILED**, nothing switched, finished 14:21 (2s): 401" \
        in text
    assert "power-cycled dgx5" not in text
    assert ("- 14:22 power-cycle dgx7 **FAILED** via HA (off 19m01s → on at 14:41 by r1), "
            "finished 14:41 (19m02s): completed by r1") in text
    assert "- 14:41 resume k1: done, finished 14:41 (1s); switched switch.dgx7 on at 14:41" \
        in text
    assert ("cluster-power-off 8nodes-switch: **FAILED**, finished 14:41 (0s); switched "
            "switch.dgx5 off at 14:41, switch.sw6_mt off at 14:41 (shared switches switched: "
            "switch.sw6_mt): dgx6 plug unavailable") in text
