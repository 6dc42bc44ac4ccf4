"""Write measured figures into a recipe, keeping its comments and layout: the
one path behind ``sparktui record`` and every workflow that records what it
measured (``sparktui envelope``'s ``[fit] prefill_scratch_*``), and behind a
boot's figures recorded with the operator's yes (`record_boot`: ``fit
--record``, ``serve``'s question, the console's offer). The edited recipe must
still validate, or nothing is written; the file is swapped in atomically with
its mode kept."""

from __future__ import annotations

import stat
from collections.abc import Mapping
from pathlib import Path

from sparktui.core.config import Config
from sparktui.core.measured import BootFigures, measured_boots, recordable
from sparktui.core.recipe import Recipe
from sparktui.core.recipe_load import load_recipe, recipe_file, recipe_from_text
from sparktui.core.tomledit import set_value
from sparktui.core.tomlschema import read_text
from sparktui.ops.files import replace_file
from sparktui.ops.journal import Journal, JournalError

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
    replace_file(path, edited, stat.S_IMODE(path.stat().st_mode))
    return path


def journal_boots(config: Config, recipe: str, cluster: str) -> list[BootFigures]:
    """Every successful serve of the recipe on the cluster that measured its
    memory, oldest first, from the journal (none readable: nothing measured)."""
    try:
        journal = Journal.in_state_dir(config.state_dir())
        ends = [(e.wf, e.t, e.detail) for e in journal.entries()
                if e.kind == "end" and e.workflow == "serve" and e.ok]
    except (OSError, JournalError):
        return []
    return measured_boots(ends, recipe, cluster)


def unrecorded(recipe: Recipe, boot: BootFigures) -> dict[str, Value]:
    """What ``boot`` measured that the recipe does not say yet (core/measured.py
    `recordable`, without the keys the recipe already holds at that value): a
    boot whose figures are all in the recipe asks nothing."""
    spec = recipe.speculative
    have: dict[str, object] = {"model.weights_per_rank_gib": recipe.model.weights_per_rank_gib,
                               "model.kv_bytes_per_token": recipe.model.kv_bytes_per_token}
    return {k: v for k, v in recordable(
        boot, spec.drafter_kv_bytes_per_token if spec else 0).items() if have.get(k) != v}


def record_boot(config: Config, recipe: Recipe, boot: BootFigures) -> tuple[Path, dict[str, Value]]:
    """Record what ``boot`` measured into the recipe (`record`: comments kept, the
    result validated, each value noted with the boot); returns the file and what
    was written. Raises ValueError when the boot measured nothing recordable, else
    as `record`."""
    spec = recipe.speculative
    values: dict[str, Value] = dict(recordable(boot, spec.drafter_kv_bytes_per_token
                                               if spec else 0))
    if not values:
        raise ValueError(f"boot {boot.boot} measured neither the weights nor the KV pool")
    return record(config, recipe.name, values, note=f"measured at boot {boot.boot}"), values
