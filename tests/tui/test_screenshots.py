"""The README's screenshots (screenshots/, written by scripts/screenshots.py)
show what the code renders: each reads, character for character, as its
scene's snapshot baseline, which test_snapshots.py holds to the code. A change
that moves a screen fails here until `scripts/screenshots.py` is run again."""

from __future__ import annotations

from pathlib import Path

import pytest

from .harness import ROOT
from .scenes import SCENES
from .screen_text import svg_text

SNAPSHOTS = Path(__file__).parent / "__snapshots__" / "test_snapshots"


@pytest.mark.parametrize("name", [s.name for s in SCENES])
def test_each_screenshot_shows_what_its_scene_renders(name: str) -> None:
    shot = ROOT / "screenshots" / f"{name}.svg"
    baseline = SNAPSHOTS / f"test_screen[{name}].svg"
    assert shot.exists(), f"{shot} missing: run scripts/screenshots.py"
    assert svg_text(shot.read_text()) == svg_text(baseline.read_text()), (
        f"{shot.name} no longer shows what the code renders: run scripts/screenshots.py")


def test_every_screenshot_is_a_scene() -> None:
    names = {s.name for s in SCENES}
    assert {p.stem for p in (ROOT / "screenshots").glob("*.svg")} <= names
