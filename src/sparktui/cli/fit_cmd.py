"""`sparktui fit RECIPE [--cluster C] [--json]`: the memory envelope per rank.

Figures the last successful boot of the recipe on the cluster measured (the
serve's journal entry, core/measured.py) are used first; ``--json`` carries them
as ``measured`` (with the boot they came from) and the derived figures as
``predicted``; the text shows both side by side. Boots of the recipe whose KV
pools differ (another pin or window) are checked for one KV bytes per token
(``kv_linearity``, null with fewer than two)."""

from __future__ import annotations

import argparse
import sys

from ..core.fit import FitReport, fit
from ..core.measured import BootFigures, kv_linearity
from ..ops.recipe_record import journal_boots, record_boot
from .common import console, print_json, recipe_and_cluster


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fit", help="memory envelope of a recipe on a cluster",
                       description="Per-rank memory envelope: weights, KV for one max-length "
                                   "request, KV pin, GMU admission, the largest window, the "
                                   "longest safe prompt. Exit 0 when it fits, 1 when refused.")
    p.add_argument("recipe")
    p.add_argument("--cluster", help="default: the cluster the recipe was qualified on")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--record", action="store_true",
                   help="write what the last successful boot measured (weights per rank, KV "
                        "bytes per token) into the recipe, comments kept")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config, recipe, cluster = recipe_and_cluster(args)
    boots = journal_boots(config, recipe.name, cluster)
    boot = boots[-1] if boots else None
    linearity = kv_linearity(boots)
    predicted = fit(config, recipe, cluster)
    report = fit(config, recipe, cluster, boot) if boot is not None else predicted
    if args.record:
        if boot is None:
            print(f"sparktui fit: no successful boot of {recipe.name} on {cluster} measured "
                  f"anything: nothing to record", file=sys.stderr)
            return 1
        try:
            path, values = record_boot(config, recipe, boot)
        except (ValueError, OSError) as exc:
            print(f"sparktui fit: nothing recorded: {exc}", file=sys.stderr)
            return 1
        print(f"{path}: " + ", ".join(f"{k} = {v}" for k, v in values.items()),
              file=sys.stderr)
    if args.json:
        print_json({**report.to_json(), "measured": boot.to_json() if boot else None,
                    "predicted": _figures(predicted),
                    "kv_linearity": linearity.to_json() if linearity else None})
    else:
        render(report)
        if boot is not None:
            _side_by_side(predicted, boot, config.guards.node_memory_gib)
        if linearity is not None:
            console().print(f"  {linearity.describe()}")
    return 0 if report.verdict == "fits" else 1


def _figures(r: FitReport) -> dict[str, object]:
    return {"weights_per_rank_gib": round(r.weights_per_rank_gib, 3),
            "kv_bytes_per_token": r.kv_bytes_per_token or None,
            "pool_tokens": r.pool_tokens}


def _side_by_side(p: FitReport, b: BootFigures, node_gib: float) -> None:
    out = console()
    out.print(f"predicted vs measured (boot {b.boot}):")
    rows = [("weights per rank", f"{p.weights_per_rank_gib:.2f} GiB",
             f"{b.weights_per_rank_gib:.2f} GiB" if b.weights_per_rank_gib else "-"),
            ("KV bytes per token", f"{p.kv_bytes_per_token:,}" if p.kv_bytes_per_token else "-",
             f"{b.kv_bytes_per_token:,}" if b.kv_bytes_per_token else "-"),
            ("KV pool tokens", f"{p.pool_tokens:,}" if p.pool_tokens else "-",
             f"{b.kv_pool_tokens:,}" if b.kv_pool_tokens else "-"),
            ("graph memory", "-", f"{b.graphs_gib:.2f} GiB" if b.graphs_gib else "-")]
    marks = b.mem_available_gib
    for key, what in (("before_load", "free before load"), ("after_load", "free after load"),
                      ("after_kv", "free after KV")):
        if key in marks:
            rows.append((what, "-", f"{marks[key]:.2f} GiB"))
    if "headroom" in marks:
        left = node_gib - p.resident_gib - max(p.kv_available_gib, 0.0)
        rows.append(("headroom serving", f"{left:.2f} GiB", f"{marks['headroom']:.2f} GiB"))
    for what, pred, seen in rows:
        out.print(f"  {what:<20} {pred:>14}  {seen:>14}")


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} GiB"


def render(r: FitReport) -> None:
    from rich.table import Table  # not imported for --json

    out = console()
    t = Table(title=f"{r.recipe} on {r.cluster}: {r.ranks} ranks, TP{r.tp}", show_header=False)
    t.add_column("what")
    t.add_column("per rank", justify="right")
    t.add_row("weights", f"{r.weights_per_rank_gb:.1f} GB ({r.weights_per_rank_gib:.2f} GiB"
              f"{', measured' if r.weights_measured else ''})")
    t.add_row("resident (weights, drafter, extras, runtime)", _gib(r.resident_gib))
    t.add_row("GMU budget", f"{r.gmu:g} x node = {r.gmu_budget_gib:.2f} GiB "
              f"(admits {r.admission_free_gib:.2f}, max GMU {r.max_admissible_gmu:.2f})")
    t.add_row("KV " + ("pin" if r.kv_pinned else "left by GMU"), _gib(r.kv_available_gib))
    t.add_row("KV bytes per token", f"{r.kv_bytes_per_token:,}" if r.kv_bytes_per_token else
              "not measured")
    t.add_row("KV for one max-length request",
              "-" if r.kv_needed_gib is None else
              f"{r.kv_needed_gib:.2f} GiB ({r.kv_needed_gb:.2f} GB)")
    t.add_row("largest window (pool tokens)",
              "-" if r.max_window_tokens is None else f"{r.max_window_tokens:,}")
    t.add_row("concurrency at max length", "-" if r.concurrency is None else
              f"{r.concurrency:.2f}x")
    if r.longest_safe_prompt_tokens is not None:
        t.add_row("longest safe prompt (prefill scratch)", f"{r.longest_safe_prompt_tokens:,}")
    t.add_row("margin", _gib(r.margin_gib))
    out.print(t)
    verdict = {"fits": "FITS", "unknown": "UNKNOWN (refused)"}.get(r.verdict, "REFUSED")
    out.print(f"verdict: {verdict}")
    for reason in r.reasons:
        out.print(f"  refused: {reason}")
    for unknown in r.unknowns:
        out.print(f"  unknown: {unknown}")
    for note in r.notes:
        out.print(f"  note: {note}")
