"""Write the README's screenshots (SVG) into screenshots/: the states a new
demo reaches (`sparktui demo --scenario long-prompt` walked from the keyboard
on the simulator's manual clock, tests/tui/demoshots.py), one run of the demo
for all of them. tests/tui/test_screenshots.py takes them again and fails
when a stored one no longer reads as the code renders it.

    .venv/bin/python scripts/screenshots.py [--out screenshots]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.tui.demoshots import demo_night  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sparktui-shots-") as workdir:
        shots = asyncio.run(demo_night(Path(workdir)))
    for name, svg in shots.items():
        path = args.out / f"{name}.svg"
        path.write_text(svg)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
