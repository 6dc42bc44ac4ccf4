"""`sparktui stop` and `sparktui recover` as an operator runs them, against the simulator."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]

pytestmark = pytest.mark.usefixtures("quick_polls")


B = "4nodes-switch-b"


async def test_stop_a_protected_lane_is_refused(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        assert await h.sparktui(cfg, "serve", "glm53-flash-eugr-2x", "--cluster", B,
                                "--detach", "--yes", monkeypatch=monkeypatch) == 0
        capsys.readouterr()
        code = await h.sparktui(cfg, "stop", "glm53-flash-eugr-2x", "--yes",
                                monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
        assert code == 3
        assert "[REFUSE] protected-lane glm53-flash-eugr-2x" in err
        assert all(c.status == "running" for c in sim.nodes["dgx5"].docker.containers.values())


async def test_stop_a_lane_with_yes_and_json(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        assert await h.sparktui(cfg, "serve", "glm53-full-mxfp4-4x-dspark8", "--cluster", B,
                                "--detach", "--yes", monkeypatch=monkeypatch) == 0
        capsys.readouterr()
        code = await h.sparktui(cfg, "stop", "glm53-full-mxfp4-4x-dspark8", "--yes", "--json",
                                monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        result = json.loads(out)
        assert result["ok"] and result["detail"]["nodes"] == ["dgx5", "dgx6", "dgx7", "dgx8"]
        assert "docker stop -t 30 sparktui-glm53-full-mxfp4-4x-dspark8-r0 && docker rm" in err
        assert not any(sim.nodes[n].docker.containers for n in ("dgx5", "dgx6"))


async def test_stop_an_unknown_lane_has_nothing_to_stop(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg):
        assert await h.sparktui(cfg, "stop", "no-such-lane", "--yes",
                                monkeypatch=monkeypatch) == 3
        assert "nothing to stop" in capsys.readouterr().err
