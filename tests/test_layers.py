"""The layering rule of DESIGN.md, enforced: the domain and the adapters never import
Textual, and nothing in the production path imports the simulator."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "sparktui"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            prefix = "." * node.level + (node.module or "")
            names.add(prefix)
    return names


def _modules(*layers: str) -> list[Path]:
    return [p for layer in layers for p in (SRC / layer).rglob("*.py")]


def test_core_and_adapters_never_import_textual():
    for path in _modules("core", "adapters", "watch", "ops"):
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
