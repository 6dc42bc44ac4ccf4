"""sparktui check / fit / serve --dry-run as an operator runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sparktui.cli.main import main

SHIPPED_CONFIG = Path(__file__).resolve().parents[2] / "config.toml"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["--config", str(SHIPPED_CONFIG), *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_check_passes_on_shipped_files(capsys):
    code, out, _ = _run(capsys, "check")
    assert code == 0 and "0 errors" in out


def test_check_fails_listing_file_line_key(capsys, config_copy):
    path = config_copy(lambda t: t.replace("rank = 4\n", 'rank = "x"\n'))
    code = main(["check", "--config", str(path)])
    err = capsys.readouterr().err
    assert code == 1
    assert f"{path}:" in err and "nodes.dgx5.rank" in err


def test_check_json(capsys):
    code, out, _ = _run(capsys, "check", "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"] and "glm53-full-native-8x-dspark8" in data["recipes"]


def test_fit_json_boot_d(capsys):
    code, out, _ = _run(capsys, "fit", "dsv41-flash-r37-4x-eager", "--json")
    data = json.loads(out)
    assert code == 1 and data["verdict"] == "refused"
    assert data["weights_per_rank_gb"] == 127.6


def test_fit_on_other_cluster(capsys):
    code, out, _ = _run(capsys, "fit", "dsv41-flash-r37-4x-eager", "--cluster", "8nodes-switch")
    assert code == 0 and "FITS" in out


def test_fit_unknown_cluster_is_a_clear_error(capsys):
    code, _, err = _run(capsys, "fit", "dsv41-flash-8x", "--cluster", "9nodes")
    assert code == 2 and "unknown cluster '9nodes'" in err


def test_serve_dry_run_renders_every_rank(capsys):
    code, out, _ = _run(capsys, "serve", "glm53-full-native-8x-dspark8", "--cluster",
                        "8nodes-switch", "--print-commands")
    assert code == 0
    assert out.count("docker run -d --name sparktui-glm53-full-native-8x-dspark8-r") == 8
    assert "TP8, nnodes 8, ranks 0-7" in out
    assert out.count("# before_serve: RoCE v2 GID") == 8


def test_serve_dry_run_json(capsys):
    code, out, _ = _run(capsys, "serve", "dsv41-flash-r37-4x-eager", "--print-commands", "--json")
    data = json.loads(out)
    assert code == 0 and data["fit"] == "refused" and len(data["ranks"]) == 4


def test_console_script_entry_point_and_config_after_subcommand():
    out = subprocess.run([sys.executable, "-m", "sparktui", "fit", "dsv41-flash-8x",
                          "--config", str(SHIPPED_CONFIG), "--json"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["verdict"] == "fits"
