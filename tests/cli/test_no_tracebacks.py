"""Bad input and faults of the environment end in one clear line, never a
traceback; an error nobody expected leaves its traceback in the debug log."""

from __future__ import annotations

import pytest

from sparktui.cli import main as main_mod
from sparktui.cli.main import main


def test_non_utf8_config_is_one_line(config_copy, capsys):
    path = config_copy()
    path.write_bytes(path.read_bytes() + b"\n# caf\xe9\n")
    assert main(["check", "--config", str(path)]) == 1
    err = capsys.readouterr().err
    assert "(encoding): byte 0xe9 is not UTF-8" in err and "Traceback" not in err


def test_unknown_sim_scenario_is_named(config_copy, capsys):
    path = config_copy(lambda t: t.replace('scenario = "normal"', 'scenario = "bogus"'))
    assert 'scenario = "bogus"' in path.read_text()
    assert main(["sim", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "simulator.scenario: unknown scenario 'bogus'" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["sim", "--speed", "-1"], ["sim", "--speed", "nan"],
                                  ["power", "cycle", "dgx7", "--off-seconds", "-5"],
                                  ["recover", "dgx7", "--off-seconds", "inf"],
                                  ["logs", "lane", "--tail", "-5"],
                                  ["bundle", "lane", "--lines", "0"],
                                  ["replay", "night.jsonl.gz", "--speed", "nan"]])
def test_flags_have_the_config_domains(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert ("out of range" in err or "finite" in err) and "Traceback" not in err


def test_unexpected_error_is_one_line_and_a_debug_log(config_copy, capsys, monkeypatch, tmp_path):
    path = config_copy(lambda t: t.replace('state_dir = "~/.local/state/sparktui"',
                                           f'state_dir = "{tmp_path / "state"}"'))

    def boom(argv):
        raise TimeoutError()

    monkeypatch.setattr(main_mod, "_dispatch", boom)
    assert main(["health", "--config", str(path)]) == 70
    err = capsys.readouterr().err.strip()
    log = tmp_path / "state" / "debug.log"
    assert err == (f"sparktui health: unexpected error: no answer in time (timed out) "
                   f"(details in {log})")
    assert "Traceback" in log.read_text() and "TimeoutError" in log.read_text()
    assert log.stat().st_mode & 0o777 == 0o600


def test_an_unexpected_error_line_carries_no_control_byte(config_copy, capsys, monkeypatch,
                                                          tmp_path):
    """The last line a dying sentinel prints (issue 30: no escape byte in its output)."""
    path = config_copy(lambda t: t.replace('state_dir = "~/.local/state/sparktui"',
                                           f'state_dir = "{tmp_path / "state"}"'))

    def boom(argv):
        raise RuntimeError("engine said \x1b[1;36m(APIServer pid=1)\x1b[0;0m\r\nboom")

    monkeypatch.setattr(main_mod, "_dispatch", boom)
    assert main(["sentinel", "--config", str(path)]) == 70
    err = capsys.readouterr().err
    assert "engine said (APIServer pid=1) boom" in err
    assert err.count("\n") == 1 and "\x1b" not in err and "\r" not in err
