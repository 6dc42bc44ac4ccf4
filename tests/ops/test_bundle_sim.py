"""`sparktui bundle` against the simulator: the cache-not-symlink failure's
bundle holds every part, opens with tar, names the failing rank and line in
SUMMARY.md, and never holds the Home Assistant token (put in the environment
and echoed back in an HA error body that lands in the journal)."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

from sparktui.core.recipe_load import load_recipe
from sparktui.ops.bundle import BundleSources, token_values, write_bundle
from sparktui.ops.guards import Override
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.power import PowerCycle
from sparktui.ops.workflows.serve import Serve, ServeOptions

B = "4nodes-switch-b"
ENV_TOKEN = "env-token-0123456789abcdef"


async def run_wf(ctx, workflow):
    """The one route: plan from a fresh observation, then run that plan."""
    return await execute(ctx, await prepare(ctx, workflow))


def members(path: Path) -> dict[str, str]:
    with tarfile.open(path) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
                for m in tar.getmembers()}


def sources(ctx, sim, config) -> BundleSources:
    return BundleSources(config=config, link=ctx.link, journal=ctx.journal, clock=ctx.clock,
                         state_dir=config.state_dir(),
                         secrets=token_values(config, [sim.token_file]), snapshot=ctx.snapshot,
                         timeout_s=5.0)


async def test_cache_not_symlink_bundle(sim_ctx, fleet_config, monkeypatch, tmp_path):
    monkeypatch.setenv(fleet_config.home_assistant.token_env, ENV_TOKEN)
    r = load_recipe(fleet_config, "glm53-flash-eugr-2x")
    async with sim_ctx("cache-not-symlink") as (sim, ctx, _):
        options = ServeOptions(overrides=frozenset({Override.HF_CACHE}), poll_s=5.0)
        result = await run_wf(ctx, Serve(r, B, options))
        assert not result.ok
        failure = result.detail["failure"]
        # a proxy that echoes the request's headers (the credential) in its error body
        sim.ha.fault = "502-echo"
        cycled = await run_wf(ctx, PowerCycle("dgx6"))
        assert not cycled.ok
        sim.ha.fault = ""
        src = sources(ctx, sim, fleet_config)
        lane = await write_bundle(src, r.name)
        node = await write_bundle(src, "dgx6")

    assert lane.path.parent == fleet_config.state_dir() / "bundles"
    assert lane.path.name.endswith(f"-{r.name}.tar.gz")
    listing = subprocess.run(["tar", "-tzf", str(lane.path)], capture_output=True, text=True,
                             check=True).stdout.split()
    assert listing[0].endswith("/SUMMARY.md")
    parts = members(lane.path)
    summary = parts["SUMMARY.md"]
    for rank, n in enumerate(("dgx5", "dgx6", "dgx7", "dgx8")):
        log = parts[f"ranks/{r.name}-r{rank}-{n}.log"]
        # the ranks were stopped and removed: the serve's own last lines stand in
        assert log.strip() and log.startswith("20")  # docker timestamps
        assert f"rank {rank} of {r.name} on {n}: its log could not be read" in summary
        assert f"kernel/{n}.log" in parts and f"snapshots/{n}.jsonl" in parts
        assert '"MemAvailable' not in parts[f"snapshots/{n}.jsonl"]
        assert '"mem_available_gib"' in parts[f"snapshots/{n}.jsonl"]
    # why, in words: what the node said, never the collector's internal exception class
    assert "its log could not be read (the command exited 1: " in summary, summary
    assert "_Refused" not in summary and "Error(" not in summary
    for name in ("plan.json", f"recipe/{r.path.name}", f"config/{fleet_config.path.name}",
                 "hashes.txt", "commands.sh", "journal.jsonl", "alerts.jsonl"):
        assert name in parts, sorted(parts)
    assert "docker run -d --name sparktui-glm53-flash-eugr-2x-r0" in parts["commands.sh"]
    assert '"hf-cache"' in parts["plan.json"] and '"plan"' in parts["plan.json"]
    node_of = {1: "dgx6", 2: "dgx7", 3: "dgx8"}
    assert f"The lane failed on **rank {failure['rank']}** on {node_of[failure['rank']]}" \
        in summary
    assert failure["line"] in summary
    assert "## Timeline" in summary and "## Next step" in summary
    assert "NAS symlink" in summary  # the next step of LocalEntryNotFoundError

    node_parts = members(node.path)
    assert "502" in node_parts["journal.jsonl"]  # the error is there ...
    for path in (lane.path, node.path):
        raw = subprocess.run(["zcat", str(path)], capture_output=True, check=True).stdout
        assert sim.ha.token.encode() not in raw and ENV_TOKEN.encode() not in raw  # ... not it
