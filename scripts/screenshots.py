"""Write the console's screenshots (SVG) into screenshots/: the same scenes
the snapshot tests check (tests/tui/scenes.py), on the scripted fleet with a
frozen clock, so the pictures in the README match the tested screens.

    .venv/bin/python scripts/screenshots.py [--out screenshots]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.tui.scenes import SCENES, Scene, scene_console  # noqa: E402


async def shoot(scene: Scene, out: Path) -> Path:
    console = scene_console()
    async with console.app.run_test(size=scene.size) as pilot:
        await scene.steps(pilot, console)
        path = out / f"{scene.name}.svg"
        path.write_text(console.app.export_screenshot(title=f"sparktui — {scene.name}"))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for scene in SCENES:
        print(asyncio.run(shoot(scene, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
