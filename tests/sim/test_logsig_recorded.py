"""The ingest prefilter over recorded logs: every line the simulated engines
and kernels write during the seeds' incidents (boot, serving, fatal ends)
gets the same verdict from `classify` as from the plain signature table, and
the phase tracker fed every rank's log says the same either way."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from sparktui.core.logsig import classify
from sparktui.sim.cluster import Sim
from sparktui.sim.testing import running_sim

sys.path.insert(0, str(Path(__file__).parents[1] / "core"))
from test_logsig_ingest import Fed, trace
from test_logsig_prefilter import table_only

from sparktui.sim.timefmt import rfc3339nano


def recorded(sim: Sim) -> list[str]:
    lines: list[str] = []
    for node in sim.nodes.values():
        for container in node.docker.containers.values():
            lines += [log.text for log in container.logs]
        lines += [node.journal.render(e).rstrip("\n") for e in node.journal.entries]
    return lines


def rank_logs(sim: Sim) -> list[Fed]:
    """Every container's log as its rank (the container's name ends in
    ``-rN``), in log order, read in 5 s batches from the first line on."""
    logs = [(container.name, log) for node in sim.nodes.values()
            for container in node.docker.containers.values() for log in container.logs]
    t0 = min((log.t for _, log in logs), default=0.0)
    fed: list[Fed] = []
    for name, log in logs:
        m = re.search(r"-r(\d+)$", name)
        fed.append((int(m.group(1)) if m else 0, log.text, (log.t - t0) // 5 * 5 + 5,
                    rfc3339nano(log.t)))
    return sorted(fed, key=lambda f: (f[2], f[3] or ""))


@pytest.mark.parametrize(("scenario", "recipe", "seconds"), [
    ("normal", "glm53-flash-eugr-2x", 3 * 3600),          # a whole boot, then serving
    ("cache-not-symlink", "dsv41-flash-8x", 120),          # LocalEntryNotFoundError, died
    ("gmu-091", "dsv41-flash-8x-lab-gmu091", 60),          # admission refused
    ("nas-missing", "dsv41-flash-8x", 700),                # DistStoreError after 601 s
])
async def test_recorded_logs_get_the_table_verdict(fleet, serve, scenario, recipe, seconds):
    async with running_sim(fleet, scenario=scenario) as sim:
        await serve(sim, recipe)
        await sim.advance(seconds)
        lines = recorded(sim)
        ranks = rank_logs(sim)
    assert len(lines) > 50
    fast = trace(ranks, plain=False)
    assert fast == trace(ranks, plain=True)
    print(scenario, fast[-1], fast[1])
    verdicts = [(classify(line), table_only(line)) for line in lines]
    assert [v for v in verdicts if v[0] != v[1]] == []
    assert any(v[0] is not None for v in verdicts)
