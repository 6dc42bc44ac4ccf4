"""What `sparktui health` reports beyond each node: everything the guards know
about the fleet around the nodes, from one `OpsState`.

Node problems come from core/nodehealth (the serve guards' own definition);
here: blocking shared switches that are off (the fabric is invisible), nodes
sharing one SSH host key, nodes held by a run lock, unfinished workflows.
"""

from __future__ import annotations

from collections.abc import Sequence

from sparktui.core import nodehealth
from sparktui.core.config import Config
from sparktui.core.nodehealth import Finding
from sparktui.ops import guards
from sparktui.ops.plan import Needs, OpsState
from sparktui.ops.resume import stale_note


def _clusters(config: Config, names: Sequence[str]) -> list[str]:
    return [c.name for c in config.clusters.values() if set(c.nodes) & set(names)]


def health_needs(config: Config, names: Sequence[str]) -> Needs:
    """Probe ``names``; read the blocking switches of every cluster they belong to
    and their host keys."""
    entities = sorted({config.switches[s].entity for c in _clusters(config, names)
                       for s in config.clusters[c].switches if config.switches[s].blocking})
    return Needs(nodes=tuple(names), switches=tuple(entities), fingerprints=tuple(names))


def fleet_findings(state: OpsState, names: Sequence[str]) -> list[Finding]:
    config = state.config
    out: list[Finding] = []
    seen: set[str] = set()
    for cluster in _clusters(config, names):
        for switch in config.clusters[cluster].switches:
            entity = config.switches[switch].entity
            if entity in seen:
                continue
            seen.add(entity)
            found = nodehealth.blocking_switch(config, cluster, switch,
                                               state.switch_states.get(entity))
            if found is not None:
                out.append(found)
    out += nodehealth.shared_host_keys(names, state.fingerprints)
    holders = state.holders()
    for node in names:
        if node in holders:
            v = guards.runlock(node, holders)
            out.append(Finding("runlock", node, f"locked by {holders[node]}", v.message, True))
    stale = state.stale_locks()
    out += [Finding("runlock", node, "stale lock (holds nothing)", stale[node], False)
            for node in names if node in stale]
    for record in state.unfinished:
        note = stale_note(record, state.snapshot.taken_at, state.clock)
        out.append(Finding("unfinished", record.wf,
                           f"unfinished {record.workflow} {record.target}"
                           + (" (stale)" if note else ""),
                           f"{record.describe()}{f' ({note})' if note else ''} -> "
                           f"`sparktui power resume` completes or closes it", False))
    return out
