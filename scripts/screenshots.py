"""Write the console's screenshots (SVG) into screenshots/: the same scenes
the snapshot tests check (tests/tui/scenes.py), on the scripted fleet with a
frozen clock, so the pictures in the README match the tested screens. Each is
taken as the snapshot test takes it (pytest-textual-snapshot's own
`take_svg_screenshot`: run headless, settle, export), so a screenshot reads
exactly as its baseline; tests/tui/test_screenshots.py holds them equal.

    .venv/bin/python scripts/screenshots.py [--out screenshots]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from textual._doc import take_svg_screenshot
from textual.pilot import Pilot

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.tui.scenes import SCENES, Scene, scene_console  # noqa: E402


def shoot(scene: Scene, out: Path) -> Path:
    console = scene_console()

    async def run_before(pilot: Pilot) -> None:
        await scene.steps(pilot, console)

    path = out / f"{scene.name}.svg"
    path.write_text(take_svg_screenshot(app=console.app, terminal_size=scene.size,
                                        run_before=run_before,
                                        title=f"sparktui — {scene.name}"))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for scene in SCENES:
        print(shoot(scene, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
