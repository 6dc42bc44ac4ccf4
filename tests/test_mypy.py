"""The type checker over the layers every workflow stands on (core/ and ops/),
with ``warn_unused_ignores``: a ``type: ignore`` that hides nothing is an error
too. Run by the README's test command, so CI runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(900)  # a cold run (no .mypy_cache) checks ~50 modules
def test_mypy_is_clean_over_core_and_ops() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--warn-unused-ignores", "--no-error-summary",
         "--config-file", str(ROOT / "pyproject.toml"),
         str(ROOT / "src" / "sparktui" / "core"), str(ROOT / "src" / "sparktui" / "ops")],
        capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
