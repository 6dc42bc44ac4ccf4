"""`sparktui check`: validate config.toml and every recipe, with lint warnings."""

from __future__ import annotations

import argparse
import sys

from ..core.config_load import load_config
from ..core.errors import InputError
from ..core.lint import lint
from ..core.recipe_load import load_all_recipes
from .common import print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="validate config.toml and every recipe",
                       description="Validate config.toml and every recipe. Exit 0 when all are "
                                   "valid (warnings do not fail), 1 with every error listed.")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    errors: list[str] = []
    warnings: list[str] = []
    recipes: list[str] = []
    try:
        config = load_config(args.config)
    except InputError as exc:
        errors = [str(p) for p in exc.problems]
    else:
        loaded, problems = load_all_recipes(config)
        errors = [str(p) for p in problems]
        recipes = sorted(loaded)
        for recipe in loaded.values():
            warnings += [str(w) for w in lint(config, recipe)]
    if args.json:
        print_json({"ok": not errors, "config": str(args.config), "recipes": recipes,
                    "errors": errors, "warnings": warnings})
    else:
        for line in errors:
            print(f"error: {line}", file=sys.stderr)
        for line in warnings:
            print(f"warning: {line}")
        status = "FAILED" if errors else "ok"
        print(f"{status}: {args.config}, {len(recipes)} recipes valid, {len(errors)} errors, "
              f"{len(warnings)} warnings")
    return 1 if errors else 0
