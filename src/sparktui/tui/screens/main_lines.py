"""What the main screen writes, from what it holds: the header's summary, the
boot log's banner, the lines under the lanes and a node's Busy with cell."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rich.text import Text

from sparktui.core.state import ClusterSnapshot, NodeSnapshot, NodeState
from sparktui.service.lanes import LaneView
from sparktui.tui.widgets.bootlog import BootLog
from sparktui.tui.widgets.tables import gate_brief

SUMMARY_WORDS = ((NodeState.ONLINE, "online"), (NodeState.STARVED, "STARVED"),
                 (NodeState.UNREACHABLE, "UNREACHABLE"), (NodeState.POWERED_OFF, "off"),
                 (NodeState.UNKNOWN, "unknown"))


def summary_line(snapshot: ClusterSnapshot, switches: Mapping[str, str | None]) -> str:
    """How many nodes are in which state, and each shared switch not on."""
    counts = [(snapshot.count(state), word) for state, word in SUMMARY_WORDS]
    parts = [f"{counts[0][0]}/{len(snapshot.nodes)} online"]
    parts += [f"{n} {word}" for n, word in counts[1:] if n]
    parts += [f"{name} {(state or 'unknown').upper()}"
              for name, state in switches.items() if state != "on"]
    return " · ".join(parts)


def banner_text(lv: LaneView | None, rank: int, log: BootLog) -> Text:
    """Two rows, each cut at the pane's edge with …, never wrapped (a wrapped
    third row hid under the log): the lane's state, its verdicts and progress,
    then its subject (what a cut takes); then the log's own view state."""
    state = "following" if log.follow else "PAUSED"
    text = Text(no_wrap=True, overflow="ellipsis")
    if lv is None:
        text.append("no lane selected — the log of the lane selected in Lanes shows here")
    else:
        node = lv.node_of(rank) or "?"
        text.append(f" {lv.phase.upper()} ", style="bold reverse")
        if lv.failure:
            text.append(f" first fatal: {lv.failure} ·", style="bold")
        if lv.gate:  # in a few words (details: enter)
            bad = lv.gate in ("garbled", "slow", "failed")
            text.append(f" gate {lv.gate}" + (f": {gate_brief(lv)}" if bad else "") + " ·",
                        style="bold" if bad else "")
        if lv.progress_text:
            text.append(f" {lv.progress_text} ·")
        text.append(f" {lv.name} rank {rank} on {node}")
    text.append(f"\n[{state} · level {log.level_name}"
                + (f" · filter '{log.text_filter}'" if log.text_filter else "")
                + (f" · search '{log.search}'" if log.search else "")
                + (" · wrap" if log.wrap else "")
                + (f" · {log.folded} probe lines folded (h)" if log.folded
                   and not log.show_probes else "")
                + (" · probe lines shown (h)" if log.show_probes else "") + "]",
                style="dim")
    return text


def activity_text(workflows: Iterable[tuple[str, str, str, str]],
                  predicted: Iterable[str]) -> Text:
    """Each running workflow's step ((kind, target, step in full, its name)),
    then each predicted OOM's evidence."""
    text = Text()
    for k, t, step, _ in workflows:
        text.append(f"\n> {k} {t}: {step}" if text else f"> {k} {t}: {step}")
    for line in predicted:
        text.append("\n" if text else "")
        text.append(f"! {line}", style="bold red")
    return text


def busy_with(snap: NodeSnapshot) -> str:
    """The Nodes table's Busy with: the first running container's lane and rank."""
    if snap.probe is None:
        return "?"
    running = snap.probe.running_containers
    if not running:
        return ""
    c = running[0]
    rank = c.labels.get("sparktui.rank")
    return f"{c.lane} r{rank}" if c.lane and rank else c.name
