"""Helpers shared by the CLI commands: loading, JSON output, rendering."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ..core.config import Config
from ..core.config_load import load_config
from ..core.errors import InputError, Problem
from ..core.recipe import Recipe
from ..core.recipe_load import load_recipe

if TYPE_CHECKING:
    from rich.console import Console


def load(args: argparse.Namespace) -> Config:
    return load_config(args.config)


def recipe_and_cluster(args: argparse.Namespace) -> tuple[Config, Recipe, str]:
    """The config, the recipe named by args.recipe and args.cluster (default: the
    cluster the recipe was qualified on), checked to exist."""
    config = load(args)
    recipe = load_recipe(config, args.recipe)
    cluster = getattr(args, "cluster", None) or recipe.cluster
    if cluster not in config.clusters:
        raise InputError([Problem(config.path, None, "--cluster",
                                  f"unknown cluster {cluster!r} (known: "
                                  f"{', '.join(config.clusters)})")])
    return config, recipe, cluster


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def console() -> Console:
    from rich.console import Console  # only the commands that draw pay for rich

    return Console(highlight=False, soft_wrap=False)
