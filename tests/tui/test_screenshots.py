"""The README's screenshots (screenshots/, written by scripts/screenshots.py)
show what the demo shows: each is taken again here from the same states a new
`sparktui demo --scenario long-prompt` reaches (tests/tui/demoshots.py, one
run of the demo for all) and must read, SVG for SVG, as the stored one. A
change that moves any of those screens fails here until
`scripts/screenshots.py` is run again (and its pictures looked at)."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

from .demoshots import NAMES, demo_night, normalized
from .harness import ROOT
from .screen_text import svg_rows, svg_text

SHOTS = ROOT / "screenshots"


@pytest.mark.timeout(300)  # one demo night, ~25 s here: handed out with the long tests
async def test_every_readme_screenshot_is_what_the_demo_shows_now(tmp_path: Path) -> None:
    shots = await demo_night(tmp_path)
    stale = []
    for name, svg in shots.items():
        stored = SHOTS / f"{name}.svg"
        if not stored.exists():
            stale.append(f"{name}: missing")
        elif normalized(stored.read_text()) != normalized(svg):
            was, now = svg_text(stored.read_text()), svg_text(svg)
            words = "; ".join(line for line in difflib.unified_diff(
                was.split("  "), now.split("  "), lineterm="", n=0)
                if line[:1] in "+-" and line[:3] not in ("+++", "---"))
            stale.append(f"{name}: {words[:600] or 'the same text, other styles'}")
    assert not stale, ("screenshots/ no longer show what the demo shows; run "
                       "scripts/screenshots.py and look at them:\n" + "\n".join(stale))


def test_every_stored_screenshot_is_one_the_demo_takes_and_the_readme_shows() -> None:
    assert {p.stem for p in SHOTS.glob("*.svg")} == set(NAMES)
    readme = (ROOT / "README.md").read_text()
    assert not [n for n in NAMES if f"(screenshots/{n}.svg)" not in readme]


def test_the_loading_lane_shows_its_progress_and_eta_as_the_readme_says() -> None:
    """The demo's InstantTensor load (stored as the demo renders it now, see
    above) read `serve: readiness` in Progress for its whole load (issue 28
    item 7): it shows the weights resident against the recipe's per rank, with
    an ETA, and the README quotes what it shows."""
    text = svg_text((SHOTS / "lanes-loading-80x24.svg").read_text())
    found = re.search(r"\d+/\d+G \d+% ETA \d+m\d\ds", text)
    assert found and "serve: readiness" not in text, text
    assert f"`{found.group(0)}`" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("name", ["incident-80x24", "incident-160x48"])
def test_a_starved_nodes_age_leaves_every_kernel_readable(name: str) -> None:
    """The incident's Nodes at 80 columns (and in the 160x48 half pane): State
    widened by `STARVED 8m00s` pushed Kernel to `6.17.0-` past an empty
    Problem column (issue 28 item 2); that column gives its width up."""
    rows = [line for line in svg_rows((SHOTS / f"{name}.svg").read_text())
            if re.match(r"│ dgx\d ", line)]
    assert any("STARVED 8m00s" in row for row in rows), rows
    online = [row for row in rows if " online " in row]
    assert online and all("6.17.0-1031" in row for row in online), online
