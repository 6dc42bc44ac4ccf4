"""Write measured figures into a recipe, keeping its comments and layout: the
one path behind ``sparktui record`` and every workflow that records what it
measured (``sparktui envelope``'s ``[fit] prefill_scratch_*``). The edited
recipe must still validate, or nothing is written; the file is swapped in
atomically with its mode kept."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from sparktui.core.config import Config
from sparktui.core.recipe_load import load_recipe, recipe_file, recipe_from_text
from sparktui.core.tomledit import set_value
from sparktui.core.tomlschema import read_text

Value = str | int | float | bool


def record(config: Config, recipe: str, values: Mapping[str, Value], note: str = "") -> Path:
    """Set each dotted key of ``values`` in ``recipe``; returns the file. Raises
    InputError (the recipe is invalid, before or after), ValueError (a key
    path that is not a table) or OSError (the file cannot be written; it is
    then unchanged)."""
    load_recipe(config, recipe)  # the recipe must exist and be valid before
    path = recipe_file(config.recipes_dir, recipe)
    edited = read_text(path)
    for key, value in values.items():
        edited = set_value(edited, tuple(key.split(".")), value, comment=note)
    recipe_from_text(config, recipe, edited)  # the same domains as every load
    _replace(path, edited, stat.S_IMODE(path.stat().st_mode))
    return path


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
