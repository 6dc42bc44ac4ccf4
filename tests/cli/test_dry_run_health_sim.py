"""`--dry-run --json` of every workflow command prints the plan scripts read
(`workflow`, `target`, `allowed`, `verdicts` [`guard`, `ok`, `overridable`,
`message`], `steps`) and exits 0 when allowed, 3 when refused, changing
nothing; and `sparktui health` shows what the guards know (a blocking shared
switch off, shared SSH host keys), exiting 1 when a serve would be refused.
Against the simulator, through `sparktui` itself."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).resolve().parents[1] / "ops" / "cli_harness.py")
assert _spec is not None and _spec.loader is not None
h = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(h)

KEYS = {"workflow", "target", "allowed", "verdicts", "steps"}


async def _plan(cfg, capsys, monkeypatch, *argv: str) -> tuple[int, dict]:
    code = await h.sparktui(cfg, *argv, "--dry-run", "--json", monkeypatch=monkeypatch)
    return code, json.loads(capsys.readouterr().out)


async def test_every_workflow_command_prints_its_plan_and_runs_nothing(tmp_path, capsys,
                                                                        monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        cases = [
            (("serve", "glm53-full-mxfp4-4x-dspark8", "--cluster", "4nodes-switch-b"), 0),
            (("stop", "no-such-lane"), 3),
            (("power", "cycle", "dgx6"), 0),
            (("power", "cycle", "dgx1"), 3),  # protected
            (("power", "off", "dgx7"), 0),
            (("power", "on", "dgx7"), 0),
            (("power", "cluster", "off", "4nodes-switch-b"), 0),
            (("recover", "dgx8"), 0),
            (("runlock", "close", "dgx5"), 3),  # no lock
            (("power", "resume", "wf-none"), 3),
        ]
        for argv, want in cases:
            code, plan = await _plan(cfg, capsys, monkeypatch, *argv)
            assert set(plan) == KEYS, argv
            assert code == want and plan["allowed"] is (want == 0), (argv, plan)
            for v in plan["verdicts"]:
                assert set(v) == {"guard", "ok", "overridable", "message"}
            if want == 3:
                assert any(not v["ok"] for v in plan["verdicts"])
            if argv[0] == "serve":
                assert plan["workflow"] == "serve" and plan["target"] == argv[1]
                assert any(v["guard"] == "port" for v in plan["verdicts"])
                assert any(s["action"].startswith("docker run -d") for s in plan["steps"])
        assert not sim.ha.calls  # nothing was switched
        assert not any(sim.nodes[n].docker.containers for n in sim.nodes)


async def test_a_busy_api_port_refuses_the_serve_naming_the_lane(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg):
        assert await h.sparktui(cfg, "serve", "glm53-flash-eugr-2x", "--cluster",
                                "4nodes-switch-b", "--detach", "--yes", "--no-qualify",
                                monkeypatch=monkeypatch) == 0
        assert await h.sparktui(cfg, "wait", "glm53-flash-eugr-2x", "--no-first-token",
                                "--quiet", monkeypatch=monkeypatch) == 0  # the port answers
        capsys.readouterr()
        code, plan = await _plan(cfg, capsys, monkeypatch, "serve",
                                 "glm53-full-mxfp4-4x-dspark8", "--cluster", "4nodes-switch-b")
        assert code == 3
        (port,) = [v for v in plan["verdicts"] if v["guard"] == "port" and not v["ok"]]
        assert "dgx5:8000 already answers, held by lane glm53-flash-eugr-2x" in port["message"]
        assert "must NOT be stopped" in port["message"]  # the lane is protected
        assert not port["overridable"]
        busy = [v for v in plan["verdicts"] if v["guard"] == "node-busy" and not v["ok"]]
        assert busy and not busy[0]["overridable"]
        assert "stop it first" not in busy[0]["message"]


async def test_health_shows_the_blocking_switch_off_and_exits_1(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg, "switch-off"):
        code = await h.sparktui(cfg, "health", "--json", monkeypatch=monkeypatch)
        report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["ok"] is False
    (switch,) = [f for f in report["fleet"] if f["check"] == "blocking-switch"]
    assert switch["subject"] == "switch.sw6_mt" and switch["blocks_serve"]
    assert "switch.sw6_mt: switch.sw6_mt is off" in report["summary"]


async def test_health_flags_nodes_sharing_one_host_key(tmp_path, capsys, monkeypatch):
    cfg = h.fleet(tmp_path)
    async with h.published(cfg, "shared-host-key"):
        code = await h.sparktui(cfg, "health", "--json", monkeypatch=monkeypatch)
        report = json.loads(capsys.readouterr().out)
    keys = [f for f in report["fleet"] if f["check"] == "host-key"]
    assert {f["subject"] for f in keys} == set(cfg.nodes)
    assert all(not f["blocks_serve"] for f in keys)  # a warning: a serve is not refused
    assert code == 0 and report["ok"] is True


async def test_a_refused_serve_dry_run_prints_the_verdict_then_every_step(tmp_path, capsys,
                                                                         monkeypatch):
    """Issue 28 item 8: `serve RECIPE --dry-run` of a refused recipe printed the
    verdicts and no launch; its text ended with the last PASS line. Now, on
    stdout: the verdict first, the refusals, the other guards, every step and
    every rank's docker run, refused or not, and the verdict last."""
    cfg = h.fleet(tmp_path)
    async with h.published(cfg) as sim:
        # Boot D on its own (protected) cluster: the fit and the protection refuse
        code = await h.sparktui(cfg, "serve", "dsv41-flash-r37-4x-eager", "--dry-run",
                                monkeypatch=monkeypatch)
        out = capsys.readouterr().out
        assert not any(sim.nodes[n].docker.containers for n in sim.nodes)
    lines = out.splitlines()
    assert code == 3, out
    assert lines[0].startswith("serve dsv41-flash-r37-4x-eager: REFUSED ("), out
    assert lines[1] == "refused:" and lines[2].startswith("  [REFUSE] "), out
    first_pass = next(i for i, ln in enumerate(lines) if ln.startswith("  [PASS]"))
    assert all(not ln.startswith("  [REFUSE]") for ln in lines[first_pass:]), out
    assert any(ln.startswith("would run (") for ln in lines), out
    assert out.count("docker run -d --name sparktui-dsv41-flash-r37-4x-eager-r") == 4, out
    assert lines[-1].startswith("verdict: REFUSED ("), out
