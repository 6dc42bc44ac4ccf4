"""`sparktui serve` (the real one) as an operator runs it, against the simulator."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]


B = "4nodes-switch-b"


async def test_serve_detach_yes_json_starts_every_rank(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        code = await h.sparktui(cfg, "serve", "glm53-flash-eugr-2x", "--cluster", B,
                                "--detach", "--yes", "--json", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        result = json.loads(out)
        assert result["ok"] and result["detail"]["detached"] is True
        assert "sparktui wait glm53-flash-eugr-2x" in result["message"]
        assert "-> start rank 3 [dgx8]: docker run -d --name sparktui-glm53-flash-eugr-2x-r3" \
            in err
        assert all(sim.nodes[n].docker.containers for n in ("dgx5", "dgx6", "dgx7", "dgx8"))


async def test_serve_through_readiness_by_default(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    # 400x, not faster: the weights load (~760 simulated s) must outlast the real
    # time from `docker run` to the readiness watch starting, or the progress
    # line asserted below is never shown (at 3000x: ~0.25 s, failed 1 run in 8)
    async with h.published(cfg, speed=400.0):
        code = await h.sparktui(cfg, "serve", "glm53-flash-eugr-2x", "--cluster", B, "--yes",
                                monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "serve glm53-flash-eugr-2x: done: glm53-flash-eugr-2x serving on " + B in out
        assert "readiness [glm53-flash-eugr-2x]: glm53-flash-eugr-2x: loading weights" in err


async def test_boot_d_is_refused_with_exit_3_and_nothing_runs(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg, scenario="boot-d-oom") as sim:
        code = await h.sparktui(cfg, "serve", "dsv41-flash-r37-4x-eager", "--cluster", B,
                                "--yes", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 3
        assert "[REFUSE] fit dsv41-flash-r37-4x-eager@4nodes-switch-b" in err
        assert "127.6 GB/node + process > 121.6 GiB" in err
        assert "(overridable with --override fit)" in err
        assert "FAILED: refused" in out
        assert not any(n.docker.containers for n in sim.nodes.values())


async def test_an_override_needs_the_name_typed_at_a_terminal(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg, scenario="cache-not-symlink") as sim:
        code = await h.sparktui(cfg, "serve", "glm53-flash-eugr-2x", "--cluster", B,
                                "--override", "hf-cache", "--yes", "--detach",
                                monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
        assert code == 4
        assert "--yes does not stand in" in err and "[OVERRIDDEN] hf-cache dgx6" in err
        assert not sim.nodes["dgx5"].docker.containers
        code = await h.sparktui(cfg, "serve", "glm53-flash-eugr-2x", "--cluster", B,
                                "--override", "hf-cache", "--detach",
                                stdin=h.Terminal("glm53-flash-eugr-2x\n"),
                                monkeypatch=monkeypatch)
        assert code == 0, capsys.readouterr().err
        assert sim.nodes["dgx5"].docker.containers


async def test_unknown_override_is_bad_input(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    code = await h.sparktui(cfg, "serve", "glm53-flash-eugr-2x", "--cluster", B,
                            "--override", "protected-node", monkeypatch=monkeypatch)
    assert code == 2
    assert "unknown override 'protected-node'" in capsys.readouterr().err
