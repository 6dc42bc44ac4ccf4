"""The ingest prefilter is exact: `classify` gives the same verdict as the
plain signature table walked in order on every line, over a fuzz corpus
built from the signatures' own needles and the real lines of test_logsig
(the simulator's recorded boot logs: tests/sim/test_logsig_recorded.py).
The reference strips logger prefixes one regex at a time, as ingest did
before its single combined match, and scans no needle and no shape."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from re import _parser  # type: ignore[attr-defined]
from re._constants import AT, BRANCH, LITERAL, SUBPATTERN  # type: ignore[import-not-found]

from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.logsig import (
    BORING,
    SIGNATURES,
    Kind,
    LogEvent,
    Shape,
    classify,
    clean,
    split_timestamp,
    strip_prefixes,
)
from sparktui.core.logsig.route import _BORING

sys.path.insert(0, str(Path(__file__).parent))
from test_logsig import CASES, JOURNAL, SGL, TS, V11, V33, V33_ERR

_JOURNAL = re.compile(r"^\S+ (?:kernel|[\w.@-]+\[\d+\]): ")
_VLLM_PROC = re.compile(r"^\((?P<proc>[^()]*?) pid=(?P<pid>\d+)\) ")
_VLLM_LEVEL = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d"
                         r"(?: \[(?P<where>[^\]]*)\])? ")
_SGLANG = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?P<ranks>(?: [A-Z]+\d+)*)\] ")
_UVICORN = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\[[^\]]*\] ")


def walk_prefixes(text: str) -> str:
    """The logger prefixes, one regex at a time (vLLM's process, then its
    level header, else the ones the first character allows; SGLang's date may
    be followed by uvicorn's level, srt/utils/common.py:3512)."""
    if text[:1] == "(":
        m = _VLLM_PROC.match(text)
        if m:
            text = text[m.end():]
    m = _VLLM_LEVEL.match(text)
    if m:
        return text[m.end():]
    first = text[:1]
    if first == "[":
        rxs: tuple[re.Pattern[str], ...] = (_SGLANG, _RANK_PREFIX)
    elif first.isupper():
        rxs = (_UVICORN, _JOURNAL)
    else:
        rxs = (_JOURNAL,)
    for rx in rxs:
        m = rx.match(text)
        if m:
            rest = text[m.end():]
            if rx is _SGLANG and (u := _UVICORN.match(rest)):
                return rest[u.end():]  # uvicorn's own line in SGLang's format for it
            return rest
    return text


def table_only(line: str) -> LogEvent | None:
    """What classify means, without any prefilter or shortcut: the first
    signature of the table, in order, whose pattern matches the message."""
    if line[:1].isdigit():
        _, line = split_timestamp(line)
    text = clean(line)
    msg = walk_prefixes(text) if text else ""
    if not msg:
        return None
    for sig in SIGNATURES:
        found = sig.pattern.search(msg)
        if found is not None:
            fields = {k: v for k, v in found.groupdict().items() if v is not None}
            return LogEvent(sig.kind, sig.severity, sig.phase, fields, msg)
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


def render(shape: Shape, numbers: list[str], picks: list[int]) -> str:
    """A line of ``shape``: its numbers and choices taken in turn (cycled)."""
    out = []
    for i, p in enumerate(shape):
        if p is None:
            out.append(numbers[i % len(numbers)])
        elif isinstance(p, str):
            out.append(p)
        else:
            out.append(p[picks[i % len(picks)] % len(p)])
    return "".join(out)


_NUMBERS = st.lists(st.text(alphabet="0123456789.", min_size=1, max_size=7), min_size=1,
                    max_size=5)
_PICKS = st.lists(st.integers(0, 20), min_size=1, max_size=5)
BORING_LINES = [render(shape, ["12", "3", "45", "6"], [0, 3, 1, 7]) for shape in BORING]


def test_each_boring_shape_tries_its_own_signature() -> None:
    want = [Kind.STATS, None, Kind.STATS, Kind.STATS, Kind.STATS, Kind.LOAD_SHARD, Kind.KV_MEMORY]
    got = [(ev.kind if (ev := classify(line)) else None) for line in BORING_LINES]
    assert got == want
    assert all(_BORING.fullmatch(line) for line in BORING_LINES)


@settings(max_examples=600, deadline=None)
@given(st.integers(0, len(BORING) - 1), _NUMBERS, _PICKS, st.sampled_from(PREFIXES))
def test_boring_shapes_get_the_table_verdict(shape: int, numbers: list[str], picks: list[int],
                                             prefix: str) -> None:
    """Lines of the shapes ingest matches whole (stats, access, shard progress),
    with any numbers (dots anywhere, as the shapes allow): the shortcut fired,
    and the verdict is the table's."""
    line = render(BORING[shape], numbers, picks)
    assert _BORING.fullmatch(line) is not None
    same_verdict(prefix + line)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(BORING_LINES), st.sampled_from(NEEDLES + ["Error", "Exception: x", "\r"]),
       st.integers(0, 300), st.sampled_from(PREFIXES))
def test_boring_lines_with_a_needle_inserted_get_the_table_verdict(line: str, needle: str,
                                                                  at: int, prefix: str) -> None:
    """A needle inside a line that is almost of a shape: no shortcut may hide it."""
    at %= len(line) + 1
    same_verdict(prefix + line[:at] + needle + line[at:])


_PREFIX_PIECES = st.sampled_from([
    "(", ")", "(EngineCore_DP0 pid=312) ", "(a (b) pid=1) ", "pid=7) ", "INFO ", "ERROR ",
    "11-29 01:02:03 ", "[x.py:1] ", "[", "]", "INFO:", "   ", "\t", "[2026-11-29 01:02:03",
    " TP0", " DP1", "] ", "[rank3]:[W1129 x] ", "dgx6 kernel: ", "systemd-journald[412]: ",
    "kernel", ": ", "Éa", "x", "7"])


@settings(max_examples=800, deadline=None)
@given(st.lists(_PREFIX_PIECES, min_size=1, max_size=7))
def test_prefixes_in_one_match_strip_what_the_walk_strips(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert strip_prefixes(text) == walk_prefixes(text), text


_PIECES = st.one_of(
    st.sampled_from(BORING_LINES),
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


def _common_start(texts: list[str]) -> str:
    n = 0
    while all(len(t) > n and t[n] == texts[0][n] for t in texts):
        n += 1
    return texts[0][:n]


def _required_runs(seq: list[tuple[object, object]]) -> list[str]:
    """The literal runs every match of a parsed regex sequence contains, in
    order (a run breaks at anything that is not one fixed character)."""
    out, cur = [], ""
    for op, av in seq:
        if op is LITERAL:
            cur += chr(av)  # type: ignore[arg-type]
        elif op is SUBPATTERN and av[1] == 0 and av[2] == 0:  # type: ignore[index]
            inner = _required_runs(av[3])  # type: ignore[index]
            if len(inner) == 1:
                cur += inner[0]
            else:
                out += [cur + inner[0], *inner[1:-1]]
                cur = inner[-1]
        elif op is BRANCH:
            alts = [_required_runs(list(alt)) for alt in av[1]]  # type: ignore[index]
            # what every alternative starts and ends with
            cur += _common_start([a[0] for a in alts])
            out.append(cur)
            cur = _common_start([a[-1][::-1] for a in alts])[::-1]
        elif op is not AT:
            out.append(cur)
            cur = ""
    out.append(cur)
    return out


def test_every_needle_is_in_every_match_of_its_signature() -> None:
    """What the prefilter and the boring shapes rest on: a signature whose
    needle is absent from a message cannot match it."""
    for sig in SIGNATURES:
        if sig.needle:
            runs = _required_runs(list(_parser.parse(sig.pattern.pattern)))
            assert any(sig.needle in run for run in runs), (sig.kind, sig.needle, runs)
