"""One-shot sub-commands import what they use: running `check`, `fit`,
`health`, `shiftlog`, `runlock` and `record` for real, in a fresh
interpreter, leaves textual, aiohttp and the simulator out of sys.modules."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("textual", "aiohttp", "sparktui.sim")

PROGRAM = f"""
HEAVY = {HEAVY!r}
import json, sys
from sparktui.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = sorted({{m for m in sys.modules for h in HEAVY if m == h or m.startswith(h + ".")}})
print(json.dumps({{"code": code, "heavy": heavy}}))
"""


def _run(argv: list[str], home: Path) -> dict[str, object]:
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": str(src), "HOME": str(home)}
    env.pop("SPARKTUI_CONFIG", None)
    done = subprocess.run([sys.executable, "-c", PROGRAM, *argv], env=env, cwd=home,
                          capture_output=True, text=True, timeout=120)
    last = done.stdout.strip().splitlines()[-1]
    return json.loads(last)


def _on_loopback(text: str) -> str:
    """Simulator off, every node on a closed loopback port (and no known_hosts
    under the temporary HOME): `health` runs its whole poll path, refused."""
    text = re.sub(r"(?m)^enabled = true", "enabled = false", text, count=1)
    ports = iter(range(9, 100))  # closed ports, one per node (two nodes are not one machine)
    return re.sub(r'(?m)^host = ".*"$', lambda _: f'host = "127.0.0.1"\nport = {next(ports)}',
                  text)


@pytest.mark.parametrize("argv", [
    ["check"],
    ["fit", "glm53-mxfp4-fp8-4x-r39", "--json"],
    ["health", "--json"],
    ["shiftlog"],
    ["runlock", "list"],
    ["record", "glm53-mxfp4-fp8-4x-r39", "model.kv_bytes_per_token", "49000"],
])
def test_one_shot_imports_no_console_http_or_simulator(argv, config_copy, tmp_path):
    config = config_copy(_on_loopback)
    home = tmp_path / "home"
    home.mkdir()
    result = _run(["--config", str(config), *argv], home)
    assert result["heavy"] == [], result
    assert isinstance(result["code"], int)
    if argv[0] == "health":
        assert result["code"] == 1          # polled and found every node unhealthy


def test_the_console_still_registers_every_command(config_copy, tmp_path):
    """The control: without a sub-command (or with --help) every module is
    registered, so the test above would see the heavy imports if the
    dispatch were not lazy."""
    home = tmp_path / "home"
    home.mkdir()
    result = _run(["--help"], home)
    assert result["code"] == 0
    assert {"textual", "sparktui.sim"} <= set(result["heavy"])
