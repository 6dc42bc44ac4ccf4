"""Issue 27: numbers bounded before arithmetic. `--stall-after 0.0000000001`
called a healthy lane stalled; 400 digits became infinity; `power cycle
--off-seconds 1e-9` ran a 1 ns off time."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.cli.shiftlog_cmd import parse_since
from sparktui.cli.wait_cmd import parse_duration


@pytest.mark.parametrize("text", ["0.0000000001", "0", "9" * 400, "9" * 400 + "h", "2d", "nan"])
def test_a_stall_window_outside_its_bounds_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration(text)


@pytest.mark.parametrize("text", ["9" * 400 + "d", "9" * 30 + "h", "1" + "0" * 300 + "s"])
def test_since_with_huge_numbers_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_since(text, now=1e9)


@given(st.text(max_size=500))
@settings(max_examples=2000, deadline=None)
def test_flag_parsers_return_a_finite_bounded_number_or_refuse(text: str) -> None:
    for parse in (parse_duration, lambda t: parse_since(t, now=2e9)):
        try:
            value = parse(text)
        except argparse.ArgumentTypeError:
            continue
        assert value == value and abs(value) < 1e12  # finite, no infinity, no NaN


def test_off_seconds_of_a_nanosecond_is_refused(capsys) -> None:
    from sparktui.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(["power", "cycle", "dgx7", "--off-seconds", "1e-9", "--yes"])
    _, err = capsys.readouterr()
    assert info.value.code == 2 and "--off-seconds" in err and ">= 1" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("where", ["missing-dir/log.md", "a-dir", "/dev/full", "x" * 300])
def test_shiftlog_output_that_cannot_be_written_is_a_clear_error(
        where, tmp_path, capsys, monkeypatch, config_copy) -> None:
    from sparktui.cli.main import main

    shipped_config_path = config_copy(lambda t: t.replace(
        'state_dir = "~/.local/state/sparktui"', f'state_dir = "{tmp_path / "state"}"'))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-dir").mkdir()
    code = main(["shiftlog", "--config", str(shipped_config_path), "-o", where])
    _out, err = capsys.readouterr()
    assert code != 0 and code != 70, err
    assert "--output" in err and "Traceback" not in err


@pytest.mark.parametrize(("argv", "flag"), [
    (["bundle", "dgx7", "--lines", "9" * 400], "--lines"),
    (["logs", "dgx7", "--tail", "9" * 400], "--tail"),
    (["logs", "dgx7", "--rank", "-" + "9" * 400], "--rank"),
    (["sim", "--seed", "9" * 400], "--seed"),
    (["sim", "--seed", "9" * 5000], "--seed"),
    (["bundle", "dgx7", "--since", "9" * 400 + "d"], "--since"),
    (["power", "cycle", "dgx7", "--off-seconds", "9" * 400, "--yes"], "--off-seconds"),
])
def test_an_int_flag_of_hundreds_of_digits_is_a_flag_error_not_an_overflow(
        capsys, argv, flag) -> None:
    """OverflowError on huge --lines, --seed, --tail was exit 70."""
    from sparktui.cli.main import main

    with pytest.raises(SystemExit) as info:
        main(argv)
    _, err = capsys.readouterr()
    assert info.value.code == 2, err
    assert f"argument {flag}" in err and "Traceback" not in err and "unexpected" not in err
