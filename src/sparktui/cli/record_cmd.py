"""`sparktui record RECIPE KEY VALUE`: write a measured figure into a recipe,
keeping its comments and layout (tomlkit), e.g. after a boot:

    sparktui record glm53-mxfp4-fp8-4x-r39 model.weights_per_rank_gib 98.86

The edited recipe must still validate, or nothing is written."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from pathlib import Path

from ..core.recipe_load import load_recipe, recipe_file
from ..core.tomledit import set_value
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
    load_recipe(config, args.recipe)  # the recipe must exist and be valid before
    path = recipe_file(config.recipes_dir, args.recipe)
    try:
        edited = set_value(path.read_text(encoding="utf-8"), tuple(args.key.split(".")),
                           _value(args.value), comment=args.note)
    except ValueError as exc:
        print(f"sparktui record: {path}: {exc}", file=sys.stderr)
        return 2
    # validate the edited text in a scratch recipes dir, then swap it in atomically
    with tempfile.TemporaryDirectory(prefix="sparktui-record-") as scratch:
        folder = Path(scratch) / args.recipe
        folder.mkdir()
        (folder / "recipe.toml").write_text(edited, encoding="utf-8")
        load_recipe(dataclasses.replace(config, recipes_dir=Path(scratch)), args.recipe)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".recipe.", suffix=".toml")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(edited)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    print(f"{path}: {args.key} = {args.value}")
    return 0
