"""`sparktui serve RECIPE --cluster C --dry-run`: the exact per-rank commands."""

from __future__ import annotations

import argparse

from ..core.fit import fit
from ..core.lint import cold_load_seconds, lint
from ..core.render import plan
from .common import print_json, recipe_and_cluster


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a recipe on a cluster",
                       description="Serve RECIPE on a cluster. --dry-run prints the per-rank "
                                   "before-serve hooks and docker commands without running them.")
    p.add_argument("recipe")
    p.add_argument("--cluster", help="default: the cluster the recipe was qualified on")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config, recipe, cluster = recipe_and_cluster(args)
    if not args.dry_run:
        print("sparktui serve: only --dry-run is available in this build; the guarded serve "
              "workflow is not implemented yet")
        return 2
    launch = plan(config, recipe, cluster)
    report = fit(config, recipe, cluster)
    warnings = [str(w) for w in lint(config, recipe)]
    if args.json:
        print_json({
            "recipe": recipe.name, "cluster": cluster, "tp": launch.tp,
            "master_addr": launch.master_addr, "master_port": launch.master_port,
            "fit": report.verdict, "reasons": report.reasons, "warnings": warnings,
            "ranks": [{"rank": r.rank, "node": r.node, "container": r.container,
                       "before_serve": r.gid_probe, "command": r.command(None)}
                      for r in launch.ranks],
        })
        return 0
    print(f"# {recipe.name} on {cluster}: TP{launch.tp}, nnodes {len(launch.ranks)}, "
          f"ranks 0-{len(launch.ranks) - 1}, master {launch.master_addr}:{launch.master_port}")
    print(f"# fit: {report.verdict}" + "".join(f"\n#   refused: {x}" for x in report.reasons))
    print(f"# expected cold load: ~{cold_load_seconds(recipe) / 60:.0f} min at 130 MB/s per node")
    for note in launch.notes:
        print(f"# note: {note}")
    for w in warnings:
        print(f"# warning: {w}")
    for r in launch.ranks:
        print(f"\n## rank {r.rank} on {r.node} ({r.container})")
        if r.gid_probe:
            print(f"# before_serve: RoCE v2 GID index of {','.join(r.hcas)} from sysfs "
                  f"(passed as NCCL_IB_GID_INDEX)")
            print(r.gid_probe)
        print(r.command(None))
    return 0
