"""Shared fixtures: the shipped config and a factory for broken copies of it."""

from __future__ import annotations

import gc
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_CONFIG = ROOT / "config.toml"
SHIPPED_RECIPES = ROOT / "recipes"


@pytest.fixture(autouse=True)
def _secrets_of_this_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """The redaction's secrets are per process (the token, once loaded, is masked
    everywhere): a test's registered token must not mask the next test's text.
    A test token "notify-token-…" masked every later "notify" in its worker, so
    `check --json` said "<redacted>.service" (the notify check failed in the
    whole suite only)."""
    from sparktui.core import redact

    monkeypatch.setattr(redact, "_secrets", set(redact._secrets))


@pytest.fixture
def shipped_config():
    from sparktui.core.config_load import load_config

    return load_config(SHIPPED_CONFIG)


@pytest.fixture
def config_copy(tmp_path: Path) -> Callable[[Callable[[str], str] | None], Path]:
    """Copy config.toml and recipes/ into tmp_path, optionally editing the config text."""

    def make(edit: Callable[[str], str] | None = None) -> Path:
        text = SHIPPED_CONFIG.read_text()
        if edit is not None:
            text = edit(text)
        path = tmp_path / "config.toml"
        path.write_text(text)
        if not (tmp_path / "recipes").exists():
            shutil.copytree(SHIPPED_RECIPES, tmp_path / "recipes")
        return path

    return make


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long tests start first, short ones end the run: in parallel
    (pytest-xdist hands tests out in this order) the workers then finish
    together instead of one ending the run alone on a simulated boot. First
    the tests that declare a long timeout (the tmux acceptance night, mypy,
    the differential test), then those against the simulator (``*_sim.py``)
    and the snapshots, then the rest, each group in collection order."""

    def weight(item: pytest.Item) -> tuple[float, bool]:
        marker = item.get_closest_marker("timeout")
        declared = float(marker.args[0]) if marker is not None and marker.args else 0.0
        stem = item.path.stem
        return declared, stem.endswith("_sim") or stem == "test_snapshots"

    items.sort(key=weight, reverse=True)


def pytest_configure(config: pytest.Config) -> None:
    """Python's bytecode caches, written (gitignored ``__pycache__``) even where
    PYTHONDONTWRITEBYTECODE is set, as it is on this project's build hosts:
    without them every worker and every CLI subprocess of the run compiles the
    package and rewrites the test modules afresh (collection alone: 10.5 s of
    CPU per worker, 5.1 s with the caches; three workers collect)."""
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (every imported module, the collected tests) lives
    as long as the run: frozen out of the collector's full passes (~25 a
    worker), as the console freezes what it built at start
    (`tui.app.quiet_collector`); the tests' own objects are collected as
    before."""
    gc.collect()
    gc.freeze()


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Textual memoises two methods with ``lru_cache``, which keys on ``self``:
    the last 1,024 widgets' style caches (their rendered lines) and the last 32
    data tables (their apps, services and simulators) outlive the test that
    made them. Let them go with the test: a worker kept ~300k of their objects,
    which every full collection of the run walked again."""
    if (styles := sys.modules.get("textual._styles_cache")) is not None:
        styles.StylesCache.get_inner_outer.cache_clear()
    if (table := sys.modules.get("textual.widgets._data_table")) is not None:
        table.DataTable._get_styles_to_render_cell.cache_clear()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): two workers more than this machine
    has CPUs. About a third of the suite's time waits on real time
    (subprocesses, the real sshd, tmux, timeouts), so a worker per CPU leaves
    the CPUs idle that long. On the 2-CPU box, from a fresh clone, back to
    back: 2 workers 430 s, 3 workers 288 s, 4 workers 273 s, 5 workers 299 s
    (every worker collects the suite, and the CPU-bound ones contend)."""
    return len(os.sched_getaffinity(0)) + 2
