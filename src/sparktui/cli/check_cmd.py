"""`sparktui check`: validate config.toml and every recipe, with lint warnings."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.config import Config
from ..core.config_load import load_config
from ..core.errors import InputError, Problem
from ..core.lint import lint
from ..core.recipe_load import load_all_recipes
from ..core.tomlschema import KeyLines, read_text
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
        errors = [str(p) for p in problems] + _local_files(config)
        recipes = sorted(loaded)
        for recipe in loaded.values():
            warnings += [str(w) for w in lint(config, recipe)]
        if config.notify.service:
            missing, unchecked = _notify_service(config)
            errors += missing
            warnings += unchecked
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


def _local_files(config: Config) -> list[str]:
    """Files the config names that would fail only later (issue 27): a recipes
    dir that does not exist ("0 recipes valid" passed), SSH client keys that are
    missing, a known_hosts that is missing or empty (every connect would fail)."""
    out = []
    if not config.recipes_dir.is_dir():
        out.append(f"{config.path}: recipes_dir: {config.recipes_dir} is not a directory: no "
                   f"recipe could be checked or served")
    if config.simulator.enabled:
        return out  # the simulator brings its own keys and known_hosts
    for key in config.ssh.client_keys:
        if not Path(key).expanduser().is_file():
            out.append(f"{config.path}: ssh.client_keys: {key} does not exist")
    known = Path(config.ssh.known_hosts).expanduser()
    try:
        empty = known.stat().st_size == 0
    except OSError:
        out.append(f"{config.path}: ssh.known_hosts: {known} does not exist -> add the nodes' "
                   f"host keys (ssh-keyscan, or one ssh login per node)")
    else:
        if empty:
            out.append(f"{config.path}: ssh.known_hosts: {known} is empty: no node's host key "
                       f"is known, every connection would be refused")
    return out


def _notify_service(config: Config) -> tuple[list[str], list[str]]:
    """[notify] service looked up in Home Assistant: (errors, warnings). A
    service Home Assistant does not have is an error naming those it has; a
    Home Assistant that cannot be asked is a warning (check still validates
    the files). One request, never retried (a refused token is not asked again)."""
    import asyncio

    from ..adapters.endpoints import EndpointError, resolve_endpoints
    from ..adapters.homeassistant import HomeAssistantError, open_home_assistant
    from ..core.notify import service_problem

    key = "notify.service"
    try:  # the line it is written on, as every config error names it
        line = KeyLines(read_text(config.path)).line(("notify", "service"))
    except InputError:
        line = None

    async def ask() -> list[str]:
        async with asyncio.timeout(config.home_assistant.timeout_s + 1.0), \
                open_home_assistant(config, resolve_endpoints(config)) as ha:
            return await ha.services("notify")

    try:
        existing = asyncio.run(ask())
    except (EndpointError, HomeAssistantError, TimeoutError, OSError) as exc:
        why = str(exc) or type(exc).__name__
        return [], [str(Problem(config.path, line, key, f"could not check "
                                f"{config.notify.service} in Home Assistant: {why}"))]
    problem = service_problem(config.notify.service, existing)
    return ([str(Problem(config.path, line, key, problem))] if problem else []), []
