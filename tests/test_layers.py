"""The layering rule of DESIGN.md, enforced: the domain and the adapters never import
Textual, and nothing in the production path imports the simulator."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "sparktui"


@functools.cache  # each test reads the same modules: parsed once per run
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text())


@functools.cache
def _imports(path: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            prefix = "." * node.level + (node.module or "")
            names.add(prefix)
    return frozenset(names)


def _modules(*layers: str) -> list[Path]:
    return [p for layer in layers for p in (SRC / layer).rglob("*.py")]


def test_core_and_adapters_never_import_textual():
    for path in _modules("core", "adapters", "watch", "ops", "service"):
        bad = {n for n in _imports(path) if n.split(".")[0] == "textual"}
        assert not bad, f"{path} imports {bad}"


def test_core_is_pure():
    forbidden = {"asyncssh", "httpx", "aiohttp", "socket", "subprocess", "psutil"}
    for path in _modules("core"):
        bad = {n for n in _imports(path) if n.split(".")[0] in forbidden}
        assert not bad, f"{path} imports {bad}"


def test_production_path_never_imports_the_simulator():
    allowed = {"sim_cmd.py", "demo_cmd.py"}
    for path in _modules("core", "adapters", "watch", "ops", "tui", "cli"):
        if path.name in allowed:
            continue
        bad = {n for n in _imports(path) if "sim" in n.split(".") and n.lstrip(".") != ""}
        assert not bad, f"{path} imports the simulator: {bad}"


def test_only_adapters_and_the_simulator_touch_the_network_libraries():
    network = {"asyncssh", "httpx", "aiohttp"}
    for path in _modules("core", "watch", "ops", "tui", "service"):
        bad = {n for n in _imports(path) if n.split(".")[0] in network}
        assert not bad, f"{path} imports {bad}: network I/O belongs in adapters/"


LAYERS = ("core", "adapters", "watch", "ops", "service", "tui", "cli")
"""Bottom to top: a module may import its own layer and the ones below it."""


def _absolute(path: Path, name: str) -> str:
    """``..core.x`` seen from sparktui/cli/y.py -> ``sparktui.core.x``."""
    if not name.startswith("."):
        return name
    level = len(name) - len(name.lstrip("."))
    package = list(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    base = package[:len(package) - level + 1]
    rest = name.lstrip(".")
    return ".".join([*base, rest] if rest else base)


def test_imports_point_down_only():
    for layer in LAYERS:
        rank = LAYERS.index(layer)
        for path in _modules(layer):
            for name in _imports(path):
                parts = _absolute(path, name).split(".")
                if parts[0] != "sparktui" or len(parts) < 2 or parts[1] not in LAYERS:
                    continue
                assert LAYERS.index(parts[1]) <= rank, \
                    f"{path.relative_to(SRC)} imports {name}: {layer} may not import {parts[1]}"


def test_the_layer_check_resolves_relative_imports():
    cli = SRC / "cli" / "x.py"
    assert _absolute(cli, "..core.config") == "sparktui.core.config"
    assert _absolute(cli, ".common") == "sparktui.cli.common"
    assert _absolute(SRC / "ops" / "workflows" / "y.py", "..guards") == "sparktui.ops.guards"


def test_no_bound_drops_a_cancellation():
    """``asyncio.wait_for`` on Python 3.11 returns its awaitable's result (or
    failure) instead of a cancellation that arrives in the same turn (CPython
    gh-86296): a task told to stop keeps going, its owner waiting on it. Bounds
    are ``asyncio.timeout`` (or core.clock.within on the injected clock)."""
    for path in SRC.rglob("*.py"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Attribute) and node.attr == "wait_for" \
                    and isinstance(node.value, ast.Name) and node.value.id == "asyncio":
                raise AssertionError(f"{path}:{node.lineno} uses asyncio.wait_for")
