"""The type checker over the whole package (core, adapters, watchers, ops,
service, console, simulator, CLI), with ``warn_unused_ignores``: a ``type:
ignore`` that hides nothing is an error too. Run by the README's test command, so CI runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(900)  # a cold run (no .mypy_cache) checks ~160 modules (~20 s)
def test_mypy_is_clean_over_the_package() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--warn-unused-ignores", "--no-error-summary",
         "--config-file", str(ROOT / "pyproject.toml"),
         str(ROOT / "src" / "sparktui")],
        capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
