"""The pickers' options. The recipe × cluster picker: every cluster with the
verdict the serve's own guards gave it (the same preview the CLI's ``serve
--dry-run`` prints), the refusals in a line, the first that passes chosen by
default. The boot log's rank picker: every rank of the lane, those on a dark
node too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.text import Text

from sparktui.service.actions import ActionPreview
from sparktui.tui.screens.confirm import grouped
from sparktui.watch.readiness import RankContainer

VERDICT_WORDS = {"passes": ("PASS", "bold green"),
                 "overridable": ("OVERRIDABLE", "bold yellow"),
                 "refused": ("REFUSED", "bold red")}


def serve_verdict(preview: ActionPreview) -> str:
    """``passes``, ``overridable`` (every refusal has an override) or ``refused``."""
    if preview.allowed:
        return "passes"
    if preview.refusals and all(v.override is not None for v in preview.refusals):
        return "overridable"
    return "refused"


def cluster_choice(cluster: str, preview: ActionPreview, qualified: bool) -> Text:
    word, style = VERDICT_WORDS[serve_verdict(preview)]
    text = Text()
    text.append(f"{word:<11} ", style=style)
    text.append(cluster, style="bold")
    text.append(f"  {len(preview.nodes)} nodes")
    if qualified:
        text.append("  the recipe's own", style="dim")
    if preview.refusals:
        text.append("\n  why: " + grouped(list(preview.refusals)))
    warnings = [v for v in preview.report.verdicts if v.warning]
    if warnings:
        text.append("\n  warn: " + grouped(warnings), style="yellow")
    return text


def cluster_options(previews: Mapping[str, ActionPreview],
                    qualified: str) -> tuple[list[tuple[str, Text]], int]:
    """The picker's options in order, and the index of the default: the first
    that passes (else the first)."""
    options = [(c, cluster_choice(c, p, c == qualified)) for c, p in previews.items()]
    passing = [i for i, p in enumerate(previews.values()) if p.allowed]
    return options, passing[0] if passing else 0


def rank_options(listed: Sequence[RankContainer], seen: Mapping[int, RankContainer],
                 states: Mapping[str, str]) -> list[tuple[str, str]]:
    """(rank, label) of every rank listed now and every one seen before: a rank
    on a dark node leaves the lane's listing (its node does not answer), and
    its last recorded lines are exactly what the operator wants to read."""
    now = {r.rank: r for r in listed}
    return [(str(r.rank), f"rank {r.rank} on {r.node} ({r.container})" if r.rank in now
             else f"rank {r.rank} on {r.node}: {states.get(r.node, 'unknown')}, "
                  "its last recorded lines")
            for r in sorted({**seen, **now}.values(), key=lambda r: r.rank)]
