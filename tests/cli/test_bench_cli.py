"""`sparktui bench LANE --json` (the real command) against the simulator: the
two keys, exactly, and the report on disk; bad lists are usage errors."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from sparktui.cli.main import main
from sparktui.core.config import Config
from sparktui.core.config_load import load_config

_spec = importlib.util.spec_from_file_location(
    "cli_harness", Path(__file__).parents[1] / "ops" / "cli_harness.py")
h = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(h)  # type: ignore[union-attr]

B = "4nodes-switch-b"


def fleet(tmp_path: Path) -> Config:
    """The harness's fleet with a copy of the recipes: these commands write into them
    (never the shipped files)."""
    shutil.copytree(h.ROOT / "recipes", tmp_path / "recipes")
    h.fleet(tmp_path)
    path = tmp_path / "config.toml"
    path.write_text(path.read_text().replace(f'recipes_dir = "{h.ROOT / "recipes"}"',
                                             f'recipes_dir = "{tmp_path / "recipes"}"'))
    config = load_config(path)
    assert config.recipes_dir == tmp_path / "recipes"
    return config
LANE = "glm53-flash-eugr-2x"


async def test_bench_json_has_exactly_the_issue_keys(tmp_path, capsys, monkeypatch):
    cfg = fleet(tmp_path)
    async with h.published(cfg, speed=40.0):
        code = await h.sparktui(cfg, "serve", LANE, "--cluster", B, "--yes", "--no-qualify",
                                monkeypatch=monkeypatch)
        _, err = capsys.readouterr()
        assert code == 0, err
        code = await h.sparktui(cfg, "bench", LANE, "--depths", "0,1024", "--concurrency", "1",
                                "--json", monkeypatch=monkeypatch)
        out, err = capsys.readouterr()
        assert code == 0, err
        result = json.loads(out)
        assert list(result) == ["runs", "report"]
        assert [(r["depth"], r["concurrency"]) for r in result["runs"]] == [(0, 1), (1024, 1)]
        assert list(result["runs"][0]) == ["depth", "concurrency", "prefill_tps", "decode_tps",
                                           "ttft_ms"]
        assert Path(result["report"]).exists() and result["report"].endswith("_bench.json")


@pytest.mark.parametrize("flag,value,words", [("--depths", "4096,0", "strictly increasing"),
                                              ("--concurrency", "0", "outside 1..64")])
def test_bad_lists_are_a_usage_error(flag, value, words, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", LANE, flag, value])
    assert exc.value.code == 2
    assert words in capsys.readouterr().err
