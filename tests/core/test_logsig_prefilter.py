"""The ingest prefilter is exact: `classify` gives the same verdict as the
plain signature table walked in order on every line, over a fuzz corpus
built from the signatures' own needles and the real lines of test_logsig
(the simulator's recorded boot logs: tests/sim/test_logsig_recorded.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.logsig import SIGNATURES, LogEvent, classify, event_of, message_of

sys.path.insert(0, str(Path(__file__).parent))
from test_logsig import CASES, JOURNAL, SGL, TS, V11, V33, V33_ERR


def table_only(line: str) -> LogEvent | None:
    """What classify means, without any prefilter: the first signature of
    the table, in order, whose pattern matches the message."""
    msg = message_of(line)
    if not msg:
        return None
    for sig in SIGNATURES:
        found = sig.pattern.search(msg)
        if found is not None:
            return event_of(sig, found, msg)
    return None


def same_verdict(line: str) -> None:
    assert classify(line) == table_only(line), line


NEEDLES = sorted({s.needle for s in SIGNATURES if s.needle})
REAL = [case[0] for case in CASES]
PREFIXES = ["", TS, V33, V33_ERR, V11, SGL, JOURNAL, "INFO:     ", "[rank0]:[W1129] "]


def test_every_real_line_and_every_needle_alone() -> None:
    for line in REAL + NEEDLES:
        for prefix in PREFIXES:
            same_verdict(prefix + line)


def test_overlapping_needles_are_all_tried() -> None:
    """Needle occurrences that share characters (the scan reports one of
    them): every pair glued on its longest overlap, in both orders."""
    for a in NEEDLES:
        for b in NEEDLES:
            for k in range(min(len(a), len(b)), 0, -1):
                if a.endswith(b[:k]):
                    same_verdict(a + b[k:])
                    same_verdict("x " + a + b[k:] + ": boom")
                    break


def test_real_lines_with_an_overlapping_needle_glued_on() -> None:
    """A real line whose needle shares characters with another needle glued
    before or after it (``...required`` + ``died ...``): the scan reports
    the glued one first, the line's own signature must still be tried."""
    glued = 0
    for line in REAL:
        for b in NEEDLES:
            at = line.find(b)
            if at < 0:
                continue
            for a in NEEDLES:
                for k in range(1, min(len(a), len(b))):
                    if a.endswith(b[:k]):       # a overlaps the start of b
                        same_verdict(line[:at] + a[:-k] + line[at:])
                        glued += 1
                    if b.endswith(a[:k]):       # a overlaps the end of b
                        end = at + len(b)
                        same_verdict(line[:end] + a[k:] + line[end:])
                        glued += 1
    assert glued > 100


_PIECES = st.one_of(
    st.sampled_from(NEEDLES),
    st.sampled_from(REAL),
    st.sampled_from([p.strip() for p in PREFIXES if p.strip()]),
    st.text(alphabet=st.characters(codec="ascii", exclude_characters="\r\n"), max_size=12),
    st.sampled_from([" ", ": ", "Error", "Exception: ", "(", ")", "123", "4.5 GiB", "%|"]),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_PIECES, min_size=1, max_size=6), st.sampled_from(PREFIXES))
def test_fuzzed_lines_get_the_table_verdict(pieces: list[str], prefix: str) -> None:
    same_verdict(prefix + "".join(pieces))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(REAL), st.integers(0, 300), st.integers(0, 300), st.text(max_size=20))
def test_cut_and_spliced_real_lines_get_the_table_verdict(line: str, start: int, end: int,
                                                         junk: str) -> None:
    same_verdict(line[start:] + junk + line[:end])
