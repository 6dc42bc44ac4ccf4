"""Issue 27 done-when, the flag domain: every typed flag of every command (found
from the parser, so a new flag is covered without a test edit) is given
hostile text; its parser either returns a finite, bounded value or raises one
of the errors argparse turns into a usage error naming the flag (exit 2) —
never OverflowError or anything else, which is exit 70."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.cli.main import _subcommands, build_parser

USAGE_ERRORS = (argparse.ArgumentTypeError, TypeError, ValueError)
"""What argparse reports as ``argument --flag: ...`` (exit 2)."""


def _typed_flags() -> list[tuple[str, str, Callable[[str], Any]]]:
    out = []
    for command, sub in _subcommands(build_parser()).items():
        for action in sub._actions:
            if callable(action.type) and action.option_strings:
                out.append((command, action.option_strings[-1], action.type))
    return out


FLAGS = _typed_flags()
digits = st.integers(1, 6000).map(lambda n: "9" * n)
HOSTILE = st.one_of(
    st.text(max_size=60),
    digits, digits.map(lambda d: "-" + d), digits.map(lambda d: d + "." + d),
    digits.map(lambda d: d + "h"), digits.map(lambda d: d + "d"), digits.map(lambda d: "1e" + d),
    st.sampled_from(["nan", "inf", "-inf", "1e-9", "0.0000000001", "1e308", "-0", "0x10",
                     "1_000", "٣", "１２", " 5 ", "5\n", "", "2026-13-45", "9999-12-31T23:59",
                     "0001-01-01", "1,2,3", ",", "1,,2", "-1,2"]),
    st.integers().map(str), st.floats().map(repr),
)


def test_the_typed_flags_are_found() -> None:
    names = {flag for _, flag, _ in FLAGS}
    assert {"--lines", "--tail", "--seed", "--since", "--off-seconds", "--depth",
            "--stall-after", "--speed"} <= names, names


def _bounded(value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int):
        return abs(value) < 2**63
    if isinstance(value, float):
        return math.isfinite(value) and abs(value) < 1e15
    if isinstance(value, tuple | list):
        return all(_bounded(v) for v in value)
    return True


@given(which=st.sampled_from(FLAGS), text=HOSTILE)
@settings(max_examples=3000, deadline=None, derandomize=True)
def test_every_typed_flag_refuses_cleanly_or_returns_a_bounded_value(which, text) -> None:
    command, flag, parse = which
    try:
        value = parse(text)
    except USAGE_ERRORS:
        return
    assert _bounded(value), f"{command} {flag} {text[:40]!r} -> {value!r}"
