"""Ingest remembers a line's route (where its message starts, which
signature it matches) by the line with every digit made ``0``. That is exact
only while every pattern the plain walk uses treats the ten ASCII digits
alike: checked here on the parsed patterns, and by the verdicts of lines
that differ in their digits only (test_logsig_prefilter.table_only is the
reference, with no memo, prefilter or shape)."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from re import _parser  # type: ignore[attr-defined]
from re._constants import (  # type: ignore[import-not-found]
    CATEGORY,
    CATEGORY_DIGIT,
    CATEGORY_NOT_SPACE,
    CATEGORY_WORD,
    GROUPREF,
    GROUPREF_EXISTS,
    IN,
    LITERAL,
    NEGATE,
    NOT_LITERAL,
    RANGE,
)
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core import logsig
from sparktui.core.logsig import SIGNATURES, classify, route

sys.path.insert(0, str(Path(__file__).parent))
from test_logsig_prefilter import BORING_LINES, NEEDLES, PREFIXES, REAL, same_verdict

DIGITS = frozenset(range(ord("0"), ord("9") + 1))
_ALL_DIGITS = {CATEGORY_DIGIT, CATEGORY_WORD, CATEGORY_NOT_SPACE}
"""Categories holding every ASCII digit; the others hold none."""


def _digits_of_set(items: list[tuple[Any, Any]]) -> frozenset[int]:
    found: set[int] = set()
    negate = False
    for op, av in items:
        if op is NEGATE:
            negate = True
        elif op is LITERAL and av in DIGITS:
            found.add(av)
        elif op is RANGE:
            lo, hi = av
            found |= {d for d in DIGITS if lo <= d <= hi}
        elif op is CATEGORY and av in _ALL_DIGITS:
            found |= DIGITS
    return DIGITS - found if negate else frozenset(found)


def _subpatterns(av: Any) -> list[list[tuple[Any, Any]]]:
    out = []
    for part in av if isinstance(av, tuple | list) else (av,):
        if isinstance(part, _parser.SubPattern):
            out.append(list(part))
        elif isinstance(part, list):
            out += [list(p) for p in part if isinstance(p, _parser.SubPattern)]
    return out


def digit_blind(seq: list[tuple[Any, Any]]) -> list[str]:
    """What in a parsed pattern tells one ASCII digit from another: a
    literal digit, a set holding some digits but not all, a back-reference
    (it compares the text itself). Empty when nothing does."""
    faults = []
    for op, av in seq:
        if op in (LITERAL, NOT_LITERAL) and av in DIGITS:
            faults.append(f"literal {chr(av)!r}")
        elif op is IN and len(_digits_of_set(av)) not in (0, 10):
            faults.append(f"set {av}")
        elif op in (GROUPREF, GROUPREF_EXISTS):
            faults.append("back-reference")
        else:
            for sub in _subpatterns(av):
                faults += digit_blind(sub)
    return faults


WALKED = {"timestamp": route._LINE_TS, "ANSI": route._ANSI, "prefix": route._PREFIX,
          **{f"{s.kind}/{s.needle}": s.pattern for s in SIGNATURES}}
"""Every pattern the plain walk matches (message_of, then the table)."""


def test_every_pattern_of_the_walk_treats_digits_alike() -> None:
    for name, rx in WALKED.items():
        assert digit_blind(list(_parser.parse(rx.pattern, rx.flags))) == [], name
    assert not any(ch.isdigit() for n in NEEDLES for ch in n)


def test_the_check_sees_what_would_break_the_memo() -> None:
    """A pattern that tells digits apart is caught (the check cannot pass blind)."""
    for bad in (r"exit code 137", r"[1-9]\d*", r"[^0]", r"(\d)\1", r"x[\s1]"):
        assert digit_blind(list(_parser.parse(bad))), bad
    for good in (r"[\d,]+", r"[^)]", r"\w+ \S", r"[0-9.]+", r"(?P<n>\d+)x"):
        assert digit_blind(list(_parser.parse(good))) == [], good


_LINES = st.sampled_from(REAL + BORING_LINES + NEEDLES)


@settings(max_examples=1500, deadline=None)
@given(_LINES, st.sampled_from(PREFIXES), st.text("0123456789٣", min_size=1, max_size=40))
def test_lines_that_differ_in_their_digits_get_each_its_own_verdict(
        line: str, prefix: str, digits: str) -> None:
    """The line, then the line with its digits replaced (a remembered route
    is reused for the second): both verdicts are the plain walk's. A
    non-ASCII digit (``٣``) is a different key."""
    full = prefix + line
    new = iter(digits * (1 + len(full) // len(digits)))
    other = re.sub(r"\d", lambda _: next(new), full)
    for text in (full, other, full):
        same_verdict(text)


def test_a_fatal_line_is_found_whatever_route_was_remembered_before_it() -> None:
    """The routes of one engine's chatter and stats are remembered; a fatal
    line among them is still found, with its own fields."""
    for line in BORING_LINES:
        classify(line)
    ev = classify("(EngineCore_DP0 pid=312) ERROR 11-29 01:02:03 [core.py:9] "
                  "Worker proc VllmWorker-3 died unexpectedly (exit code: -9)")
    assert ev is not None and ev.fatal and dict(ev.fields) == {"proc": "VllmWorker-3",
                                                               "exit_code": "-9"}


def test_long_lines_and_lone_surrogates() -> None:
    """A line past ROUTE_KEY_MAX is routed without the memo; a lone
    surrogate (a follower decoding with surrogateescape) is a key like any."""
    long = "x" * logsig.ROUTE_KEY_MAX + " NCCL error: unhandled system error"
    ev = classify(long)
    assert ev is not None and ev.fields["error"] == "unhandled system error"
    assert classify("\udcff NCCL error: boom") is not None
    same_verdict("\ud800 EngineDeadError: 1")
