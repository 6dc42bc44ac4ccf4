"""`sparktui serve RECIPE --cluster C`: the guarded serve, through readiness by
default (`--detach` returns once the ranks started), progress on stderr.
`--dry-run [--json]` prints the plan on stdout (from one probe of the
cluster) and runs nothing: the verdict first, the refusals, every other guard,
then every step with its exact command (each rank's docker run), refused or
not, and the verdict again last; `--print-commands` prints the exact
per-rank commands without contacting any node. After a boot, what it measured
that the recipe does not say yet is printed, and recorded with the operator's
yes at a terminal (else the `fit --record` command is printed)."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from typing import TextIO

from ..core.config import Config
from ..core.errors import InputError
from ..core.fit import fit
from ..core.lint import cold_load_seconds, lint
from ..core.recipe import Recipe
from ..core.recipe_load import load_recipe
from ..core.render import plan
from ..ops.confirm import Confirmation
from ..ops.context import open_context
from ..ops.guards import parse_overrides
from ..ops.plan import dry_run_lines
from ..ops.recipe_record import journal_boots, record_boot, unrecorded
from ..ops.workflows.execute import prepare
from ..ops.workflows.runner import WorkflowResult
from ..ops.workflows.serve import Serve, ServeOptions
from .common import print_json, recipe_and_cluster
from .ops_common import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    add_common,
    confirm,
    drive,
    run_async,
    stderr_printer,
)
from .wait_cmd import parse_duration


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a recipe on a cluster",
                       description="Serve RECIPE on a cluster: guards, lock, image sync where "
                                   "missing, GID hook, start ranks, then follow every rank until "
                                   "ready (port, health, models, first token), failed (first "
                                   "fatal line of any rank: the ranks are stopped unless --keep) "
                                   "or stalled. --dry-run prints the plan (guards and steps); "
                                   "--print-commands prints the per-rank before-serve hooks "
                                   "and docker commands without contacting any node.")
    p.add_argument("recipe")
    p.add_argument("--cluster", help="default: the cluster the recipe was qualified on")
    add_common(p)
    p.add_argument("--print-commands", action="store_true",
                   help="print the per-rank commands offline, contact nothing")
    p.add_argument("--detach", action="store_true",
                   help="return once the ranks started (`sparktui wait LANE` follows the boot)")
    p.add_argument("--keep", action="store_true",
                   help="keep the ranks running after a failure (first or unknown boots)")
    p.add_argument("--override", action="append", default=[], metavar="GUARD[,GUARD]",
                   help="override an overridable refusal (kernel, fit, nas-mount, hf-cache, "
                        "stale-container, node-busy, switch-unknown); typed confirmation, "
                        "journaled")
    p.add_argument("--build-node", default=None,
                   help="node to sync a missing image from (default: any node that has it)")
    p.add_argument("--stall-after", type=parse_duration, default=None, metavar="DURATION",
                   help="stalled after this long without progress (default: the recipe's, "
                        "else [console] stall_after_s)")
    p.add_argument("--no-qualify", action="store_true",
                   help="skip the quality gate after readiness (copy, identifiers, bench)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config, recipe, cluster = recipe_and_cluster(args)
    if not args.print_commands:
        return run_async("serve", _main, args)
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


async def _main(config: Config, args: argparse.Namespace) -> int:
    recipe = load_recipe(config, args.recipe)
    try:
        overrides = parse_overrides(n for arg in args.override for n in arg.split(",") if n)
    except ValueError as exc:
        print(f"sparktui serve: {exc}", file=sys.stderr)
        return EXIT_INPUT
    options = ServeOptions(detach=args.detach, keep=args.keep, overrides=overrides,
                           build_node=args.build_node, stall_after_s=args.stall_after,
                           qualify=not args.no_qualify)
    serve = Serve(recipe, args.cluster or recipe.cluster, options)
    async with open_context(config, emit=stderr_printer(final=args.json)) as ctx:
        if args.dry_run and not args.json:
            plan = await prepare(ctx, serve)
            print("\n".join(dry_run_lines(plan)))
            return EXIT_OK if plan.allowed else EXIT_REFUSED
        return await drive(ctx, serve, args,
                           after=None if args.json else partial(offer_record, config, recipe,
                                                                ask=not args.yes))


def offer_record(config: Config, recipe: Recipe, result: WorkflowResult, *, ask: bool,
                 stdin: TextIO | None = None) -> None:
    """After a boot: what it measured that the recipe does not say yet, and the
    operator's yes to record it (at a terminal, without --yes: asked; else the
    command that records it is printed). The record path keeps the comments and
    validates the recipe (ops/recipe_record.py)."""
    cluster = str(result.detail.get("cluster") or recipe.cluster)
    if not result.ok:
        return
    boot = next((b for b in journal_boots(config, recipe.name, cluster) if b.boot == result.wf),
                None)
    if boot is None or not (new := unrecorded(recipe, boot)):
        return
    print(f"measured at boot {boot.boot}: {boot.describe()}")
    print("not in the recipe yet: " + ", ".join(f"{k} = {v}" for k, v in new.items()))
    stdin = stdin or sys.stdin
    if not ask or not stdin.isatty():
        print(f"  record them: `sparktui fit {recipe.name} --cluster {cluster} --record`")
        return
    if not confirm(Confirmation(recipe.name, False, True,
                                f"record the boot's figures into {recipe.name}'s recipe"),
                   yes=False, stdin=stdin):
        print(f"  not recorded; later: `sparktui fit {recipe.name} --cluster {cluster} "
              f"--record`")
        return
    try:
        path, values = record_boot(config, recipe, boot)
    except (InputError, ValueError, OSError) as exc:
        print(f"sparktui serve: nothing recorded: {exc}", file=sys.stderr)
        return
    print(f"{path}: " + ", ".join(f"{k} = {v}" for k, v in values.items()))
