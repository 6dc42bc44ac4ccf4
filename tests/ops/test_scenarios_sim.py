"""Every seed incident a guard should prevent is refused in its simulator
scenario, before anything runs; the ones a guard lets through with a fix
(images missing: synced) run; and a serve whose rank dies reports the rank
and its first fatal line, collects every rank's last lines and stops them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sparktui.core.recipe_load import load_recipe
from sparktui.ops.events import StepProgressed, StepStarted
from sparktui.ops.guards import Override
from sparktui.ops.shiftlog import render
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.serve import Serve, ServeOptions

B = "4nodes-switch-b"

CASES = [
    # scenario, recipe, cluster, guard, subject, words in the message
    ("boot-d-oom", "dsv41-flash-r37-4x-eager", B, "fit", None, "127.6 GB/node"),
    ("gmu-091", "dsv41-flash-8x-lab-gmu091", "8nodes-switch", "fit", None, "110.66"),
    ("kv-pin-short", "glm53-full-mxfp4-4x-dspark8-pin8", B, "fit", None, "short by 0.08 GiB"),
    ("long-prompt", "glm53-mxfp4-fp8-4x-r39-196k", B, "fit", None, "longest safe prompt"),
    ("cache-not-symlink", "glm53-flash-eugr-2x", B, "hf-cache", "dgx6", "is a directory"),
    ("nas-missing", "glm53-flash-eugr-2x", B, "nas-mount", "dgx7", "/mnt/nas is not mounted"),
    ("stale-container", "glm53-full-native-8x-dspark8", "8nodes-switch", "stale-container",
     "dgx1", "stale container sparktui-glm53-full-native-8x-dspark8-r0"),
    ("bad-kernel", "glm53-flash-eugr-2x", B, "kernel", "dgx8", "known bad"),
    ("switch-off", "glm53-flash-eugr-2x", B, "blocking-switch", None, "sw6_mt"),
    ("normal", "glm53-flash-eugr-2x", "4nodes-switch", "protected-node", "dgx1",
     "protected node"),
]


async def run_wf(ctx, workflow):
    """The one route: plan from a fresh observation, then run that plan."""
    return await execute(ctx, await prepare(ctx, workflow))


@pytest.mark.parametrize("scenario,recipe,cluster,guard,subject,words", CASES,
                         ids=[c[0] + ":" + c[3] for c in CASES])
async def test_seed_incident_is_refused_before_anything_runs(sim_ctx, fleet_config, scenario,
                                                             recipe, cluster, guard, subject,
                                                             words):
    r = load_recipe(fleet_config, recipe)
    async with sim_ctx(scenario) as (sim, ctx, events):
        before = {n: set(node.docker.containers) for n, node in sim.nodes.items()}
        result = await run_wf(ctx, Serve(r, cluster))
        assert not result.ok and result.message.startswith("refused")
        refused = result.detail["refused"]
        hit = [v for v in refused if v["guard"] == guard
               and (subject is None or v["subject"] == subject)]
        assert hit, refused
        assert words in hit[0]["message"]
        assert events.of(StepStarted) == []
        assert {n: set(node.docker.containers) for n, node in sim.nodes.items()} == before
        assert ctx.locks.list() == []
        assert "## Refusals (guards)" in render(ctx.journal.entries())


async def test_shared_host_keys_are_flagged(sim_ctx, fleet_config):
    r = load_recipe(fleet_config, "glm53-flash-eugr-2x")
    async with sim_ctx("shared-host-key") as (_, ctx, _e):
        pv = await prepare(ctx, Serve(r, B))
        assert pv.report.allowed
        flagged = {v.subject for v in pv.report.warnings if v.guard == "host-key"}
        assert flagged == {"dgx5", "dgx6", "dgx7", "dgx8"}


async def test_missing_images_are_synced_node_to_node_and_verified(sim_ctx, fleet_config):
    r = load_recipe(fleet_config, "glm53-flash-eugr-2x")
    async with sim_ctx("images-missing") as (sim, ctx, events):
        result = await run_wf(ctx, Serve(r, B, ServeOptions(detach=True, build_node="dgx5")))
        assert result.ok, result.message
        syncs = [e for e in events.of(StepStarted) if e.step == "sync image"]
        assert [e.target for e in syncs] == ["dgx6", "dgx7", "dgx8"]
        assert syncs[0].action.startswith("dgx5: docker save ghcr.io/eugr/")
        pulls = [e for e in events.of(StepProgressed) if e.step == "sync image"]
        # the lane has no phase before its containers exist: the pull is told as progress
        assert [e.message for e in pulls if ":" not in e.message.removeprefix(
            f"pulling image {r.image}")] == [
            f"pulling image {r.image} to {n} from dgx5" for n in ("dgx6", "dgx7", "dgx8")]
        assert all(e.message.startswith(f"pulling image {r.image} to {e.target} from dgx5")
                   for e in pulls)
        for node in ("dgx6", "dgx7", "dgx8"):
            assert sim.nodes[node].docker.find_image(r.image) is not None
        outcome = next(w for w in ctx.journal.workflows() if w.workflow == "serve")
        sync_steps = [s for s in outcome.steps if s.step == "sync image"]
        assert all(s.ok and "checksum" in s.message and "verified" in s.message
                   for s in sync_steps)


@pytest.mark.parametrize("dialect", ["vllm-0.33", "vllm-0.11"])
async def test_a_rank_dying_is_reported_with_its_line_and_the_ranks_are_stopped(
        sim_ctx, fleet_config, dialect):
    r = load_recipe(fleet_config, "glm53-flash-eugr-2x")
    async with sim_ctx("cache-not-symlink", dialect=dialect) as (sim, ctx, _):
        options = ServeOptions(overrides=frozenset({Override.HF_CACHE}), poll_s=5.0)
        result = await run_wf(ctx, Serve(r, B, options))
        assert not result.ok
        failure = result.detail["failure"]
        # the lane's first fatal line is the earliest by timestamp: a worker's own
        # root cause, not rank 0's "Worker proc ... died" that it caused
        assert failure["rank"] in (1, 2, 3) and "LocalEntryNotFoundError" in failure["line"]
        assert f"failed on rank {failure['rank']}: {failure['line']}" in result.message
        roots = [r for r, lines in result.detail["last_lines"].items()
                 if any("LocalEntryNotFoundError" in ln for ln in lines)]
        assert set(roots) == {"1", "2", "3"}
        assert "(ranks stopped)" in result.message
        assert set(result.detail["last_lines"]) == {"0", "1", "2", "3"}
        assert not any(c.status == "running" for n in ("dgx5", "dgx6", "dgx7", "dgx8")
                       for c in sim.nodes[n].docker.containers.values())
        assert ctx.locks.list() == []
        entries = ctx.journal.entries()
        assert any(e.kind == "override" and e.detail["overrides"] == ["hf-cache"]
                   for e in entries)
        log = render(entries)
        assert f"**FAILED** on rank {failure['rank']}" in log
        assert "## Overrides" in log


async def test_keep_leaves_the_ranks_for_the_operator(sim_ctx, fleet_config):
    r = load_recipe(fleet_config, "glm53-flash-eugr-2x")
    async with sim_ctx("cache-not-symlink") as (sim, ctx, _):
        options = ServeOptions(overrides=frozenset({Override.HF_CACHE}), keep=True, poll_s=5.0)
        result = await run_wf(ctx, Serve(r, B, options))
        assert not result.ok and "(ranks kept: --keep; `sparktui stop " in result.message
        assert sim.nodes["dgx5"].docker.containers
        assert ctx.locks.list() == []


@pytest.mark.parametrize("dialect", ["vllm-0.33", "vllm-0.11"])
async def test_a_worker_node_lost_mid_boot_fails_the_serve_and_frees_the_lock(
        sim_ctx, fleet_config, dialect):
    r = load_recipe(fleet_config, "glm53-full-mxfp4-4x-dspark8")
    # readiness: see test_serve_sim
    async with sim_ctx(speed=400.0, dialect=dialect) as (sim, ctx, events):
        def on_event(e):
            events(e)
            if isinstance(e, StepStarted) and e.step == "readiness":
                sim.set_power("dgx7", False)  # the node drops with its SSH sessions

        ctx.emit = on_event
        result = await run_wf(ctx, Serve(r, B, ServeOptions(poll_s=5.0, stall_after_s=600)))
        assert not result.ok, result.message
        # dgx7 lost its power: its rank is left alone (a docker stop there would
        # only wait out its timeout), and the message says so
        assert "(ranks stopped, except on dgx7: it does not answer)" in result.message, \
            result.message
        assert ctx.locks.list() == []
        (wf,) = [w for w in ctx.journal.workflows() if w.workflow == "serve"]
        assert wf.finished and all(s.ok is not None for s in wf.steps)
        assert not any(c.status == "running" for n in ("dgx5", "dgx6", "dgx8")
                       for c in sim.nodes[n].docker.containers.values())


async def test_boot_d_forced_past_the_fit_guard_is_caught_thrashing(sim_ctx, fleet_config):
    """With the fit refusal overridden, the serve's memory watch sees the 09-14
    14:37 signature (memory gone, then ping alive and SSH starved) on the ranks'
    nodes, ends the watch, and names the nodes to recover."""
    r = load_recipe(fleet_config, "dsv41-flash-r37-4x-eager")
    quick = replace(fleet_config, console=replace(fleet_config.console, probe_timeout_s=1.0))
    # Real time at 300x: the probes that find a node starved (and the SSH round
    # trips between them) take real time. At 1500x on a loaded host a probe's
    # round trip spanned simulated minutes: the last probe that answered could
    # predate the memory collapse (no memory evidence, no verdict), and the
    # stall window (simulated) ended the watch first.
    async with sim_ctx("boot-d-oom", config=quick, speed=300.0) as (sim, ctx, _):
        options = ServeOptions(overrides=frozenset({Override.FIT}), poll_s=5.0,
                               stall_after_s=14400)  # 48 s here: a backstop only
        plan = await prepare(ctx, Serve(r, B, options))
        for _ in range(5):  # 1 simulated second of probe timeout is ~3 ms here: on a loaded
            if plan.allowed:  # machine an idle node's probe may miss it
                break
            plan = await prepare(ctx, Serve(r, B, options))
        assert plan.allowed, [v.message for v in plan.report.refused]
        result = await execute(ctx, plan)
        assert not result.ok
        assert "thrash" in result.detail, result.message
        thrash = result.detail["thrash"]
        assert thrash["node"] in ("dgx5", "dgx6", "dgx7", "dgx8")
        assert "thrashes during the boot" in result.message
        assert f"`sparktui recover {thrash['node']}`" in result.message
        assert any("SSH" in e or "MemAvailable" in e for e in thrash["evidence"])
        assert thrash["nodes"] and all(sim.nodes[n].thrashing for n in thrash["nodes"])
        nodes = thrash["nodes"]
        assert f"{', '.join(nodes)} {'does' if len(nodes) == 1 else 'do'} not answer" \
            in result.message
        assert "**THRASH** on" in render(ctx.journal.entries())
        assert ctx.locks.list() == []
