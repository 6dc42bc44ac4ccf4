"""`sparktui record RECIPE KEY VALUE`: write a measured figure into a recipe,
keeping its comments and layout (tomlkit), e.g. after a boot:

    sparktui record glm53-mxfp4-fp8-4x-r39 model.weights_per_rank_gib 98.86

The edited recipe must still validate, or nothing is written."""

from __future__ import annotations

import argparse
import sys

from ..core.recipe_load import recipe_file
from ..ops.recipe_record import record
from .common import load


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("record", help="write a measured figure into a recipe",
                       description="Set KEY (dotted, e.g. model.kv_bytes_per_token) of RECIPE "
                                   "to VALUE, keeping the file's comments. The recipe must "
                                   "still validate, or nothing is written.")
    p.add_argument("recipe")
    p.add_argument("key", help="dotted key, e.g. model.weights_per_rank_gib")
    p.add_argument("value", help="a number, true/false, or text")
    p.add_argument("--note", default="", help="comment to put after the value")
    p.set_defaults(func=run)


def _value(text: str) -> str | int | float | bool:
    if text in ("true", "false"):
        return text == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def run(args: argparse.Namespace) -> int:
    config = load(args)
    path = recipe_file(config.recipes_dir, args.recipe)
    try:
        record(config, args.recipe, {args.key: _value(args.value)}, note=args.note)
    except ValueError as exc:
        print(f"sparktui record: {path}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"sparktui record: cannot write {path}: {exc.strerror or exc}; the recipe is "
              f"unchanged", file=sys.stderr)
        return 1
    print(f"{path}: {args.key} = {args.value}")
    return 0
