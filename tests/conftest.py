"""Shared fixtures: the shipped config and a factory for broken copies of it."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_CONFIG = ROOT / "config.toml"
SHIPPED_RECIPES = ROOT / "recipes"


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
    """The tests that declare a long timeout (the tmux acceptance night, mypy,
    the differential test) start first: in parallel (pytest-xdist) the others
    fill the remaining workers around them instead of one of them ending the
    run alone."""

    def declared_timeout(item: pytest.Item) -> float:
        marker = item.get_closest_marker("timeout")
        return float(marker.args[0]) if marker is not None and marker.args else 0.0

    items.sort(key=declared_timeout, reverse=True)


def pytest_configure(config: pytest.Config) -> None:
    """Python's bytecode caches, written (gitignored ``__pycache__``) even where
    PYTHONDONTWRITEBYTECODE is set, as it is on this project's build hosts:
    without them every worker and every CLI subprocess of the run compiles the
    package and rewrites the test modules afresh (collection alone: 10.5 s of
    CPU per worker, 5.1 s with the caches; three workers collect)."""
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): one worker more than this machine has
    CPUs. About a third of the suite's time waits on real time (subprocesses,
    the real sshd, tmux, timeouts), so a worker per CPU leaves the CPUs idle
    that long: on the 2-CPU box 3 workers ran the suite in 339 s, 2 in 430 s,
    back to back, every test passing."""
    return len(os.sched_getaffinity(0)) + 1
