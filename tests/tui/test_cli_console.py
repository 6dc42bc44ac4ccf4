"""`sparktui` / `sparktui console` when the cluster cannot be reached, and the
demo's refusal to run on a real-cluster config."""

from __future__ import annotations

from pathlib import Path

from sparktui.cli.main import main


def test_console_without_a_running_simulator_says_how_to_start_one(config_copy, tmp_path,
                                                                   capsys):
    state = tmp_path / "state"
    path = config_copy(lambda t: t.replace('state_dir = "~/.local/state/sparktui"',
                                           f'state_dir = "{state}"'))
    assert main(["--config", str(path)]) == 2  # no command: the console
    err = capsys.readouterr().err
    assert "sparktui sim" in err and "sparktui demo" in err


def test_demo_refuses_a_real_cluster_config(config_copy, capsys):
    path: Path = config_copy(lambda t: t.replace("enabled = true               # false for",
                                                 "enabled = false              # false for"))
    assert main(["--config", str(path), "demo"]) == 2
    assert "only runs on the simulator" in capsys.readouterr().err
