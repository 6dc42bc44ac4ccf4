"""The text of the details modals (enter on a node or a lane)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from sparktui.core.config import Config
from sparktui.core.envelope import DEFAULT_RUNGS
from sparktui.core.loadprogress import format_duration
from sparktui.core.nodehealth import Finding
from sparktui.core.state import NodeSnapshot
from sparktui.core.thrash import ThrashVerdict
from sparktui.ops.guards import protected_node
from sparktui.service.lanes import LaneView

PROTECTED_REFUSES = "serve, stop, power cycle, power on/off or recover"
"""What the protected-node guard refuses on a protected node (ops/guards.py:
evaluate_serve, evaluate_stop, evaluate_power; a cluster power-off skips it)."""


def node_details(config: Config, node: str, snap: NodeSnapshot | None,
                 verdict: ThrashVerdict | None, findings: Sequence[Finding] = ()) -> Text:
    """``findings``: what is wrong with the node (core/nodehealth), each with its fix."""
    cfg = config.nodes[node]
    text = Text()

    def row(key: str, value: str) -> None:
        text.append(f"{key:>14}: ", style="bold")
        text.append(f"{value}\n")

    for f in findings:
        row("PROBLEM", f.message + (" (refuses a serve" + (", overridable)" if f.overridable
                                                          else ")") if f.blocks_serve else ""))

    protected = node in config.guards.protected_nodes
    row("role", cfg.role + (" (protected)" if protected else ""))
    if protected:  # why, in the words its refusals use
        row("protected", protected_node(config, node, PROTECTED_REFUSES).message)
    row("power entity", cfg.switch)
    if snap is None:
        row("state", "not polled")
        return text
    row("state", snap.state.value)
    if snap.error:
        row("error", snap.error)
    row("liveness", {True: "answers", False: "no answer", None: "not checked"}[snap.liveness])
    if snap.probe_latency_s is not None:
        row("probe", f"{snap.probe_latency_s * 1000:.0f} ms")
    p = snap.probe
    if p is not None:
        row("kernel", p.kernel or "?")
        if p.meminfo:
            row("memory", f"{p.meminfo.used_gib:.1f} GiB used, {p.meminfo.available_gib:.1f} "
                          f"GiB available of {p.meminfo.total_gib:.1f}")
        if p.psi:
            full = f", full avg10 {p.psi.full.avg10:.2f}%" if p.psi.full else ""
            row("memory PSI", f"some avg10 {p.psi.some.avg10:.2f}%{full}")
        if p.uptime_s is not None:
            row("uptime", format_duration(p.uptime_s))
        nas = p.mount_at(cfg.nas_mount)
        row("NAS", f"{nas.device} on {nas.mountpoint}" if nas else f"NOT mounted at "
                                                                   f"{cfg.nas_mount}")
        if p.hf_cache:
            hf = p.hf_cache
            row("HF cache", f"{hf.path}: {hf.kind}" + (f" -> {hf.target}" if hf.target else ""))
        for c in p.containers:
            row("container", f"{c.name} [{c.state}] {c.status}")
        for problem in p.problems:
            row("probe problem", problem)
    if verdict is not None:
        row("thrash", verdict.level.label)
        for line in verdict.evidence:
            row("evidence", line)
        if verdict.next_step:
            row("next step", verdict.next_step)
    return text


def lane_details(lane: LaneView, ceiling_tokens: int | None = None) -> Text:
    """``ceiling_tokens``: the lane's measured longest safe prompt (None: unmeasured)."""
    text = Text()

    def row(key: str, value: str) -> None:
        text.append(f"{key:>14}: ", style="bold")
        text.append(f"{value}\n")

    row("cluster", lane.cluster)
    row("engine", f"{lane.engine} on port {lane.port}")
    row("phase", lane.phase + (f" · {lane.progress_text}" if lane.progress_text else ""))
    if lane.kv_tokens:
        row("KV pool", f"{lane.kv_tokens:,} tokens")
    if lane.concurrency:
        row("concurrency", f"{lane.concurrency:.2f}x")
    row("health", lane.health)
    if lane.decode_tps is not None:
        row("decode", f"{lane.decode_tps:.1f} tokens/s")
    row("longest prompt", f"{ceiling_tokens:,} tokens (measured by sparktui envelope)"
        if ceiling_tokens is not None else
        f"not measured: prompts over {DEFAULT_RUNGS[0]:,} tokens are refused -> "
        f"envelope {lane.name} (palette)")
    if lane.gate:
        row("gate", lane.gate_text or lane.gate)
    if lane.protected:
        row("protected", "yes: never stopped by the console")
    if lane.failure:
        row("first fatal", lane.failure)
    for r in lane.ranks:
        row(f"rank {r.rank}", f"{r.node}: {r.container} ({'running' if r.running else 'exited'})")
    return text
