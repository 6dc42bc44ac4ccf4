"""`sparktui record RECIPE KEY VALUE`: write a measured figure into a recipe,
keeping its comments and layout (tomlkit), e.g. after a boot:

    sparktui record glm53-mxfp4-fp8-4x-r39 model.weights_per_rank_gib 98.86

The edited recipe must still validate, or nothing is written."""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import tempfile
from pathlib import Path

from ..core.recipe_load import load_recipe, recipe_file, recipe_from_text
from ..core.tomledit import set_value
from ..core.tomlschema import read_text
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
        edited = set_value(read_text(path), tuple(args.key.split(".")),
                           _value(args.value), comment=args.note)
    except ValueError as exc:
        print(f"sparktui record: {path}: {exc}", file=sys.stderr)
        return 2
    recipe_from_text(config, args.recipe, edited)  # the same domains as every load
    mode = stat.S_IMODE(path.stat().st_mode)
    try:
        _replace(path, edited, mode)
    except OSError as exc:
        print(f"sparktui record: cannot write {path}: {exc.strerror or exc}; the recipe is "
              f"unchanged", file=sys.stderr)
        return 1
    print(f"{path}: {args.key} = {args.value}")
    return 0


def _replace(path: Path, text: str, mode: int) -> None:
    """Write `text` beside `path` with `path`'s mode, fsync, and swap it in atomically."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".recipe.", suffix=".toml")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
