"""The classifier: a log line to its ``LogEvent`` through the signature
table (core/logsig/table.py), fast enough to run on every line. The logger
prefix is stripped in one match, a stats, access or progress line is
recognised whole by its shape (``BORING``), any other line is scanned once
for the signatures' needles; either names the only signatures that can match
(tests/core/test_logsig_prefilter.py proves the verdicts equal the plain
walk's). That route is remembered by the line with its digits masked
(``_masked_route``), so the next stats or access line is one lookup, and an
event's fields are captured only when read. Nothing here raises on any input.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from typing import Any

from sparktui.core.logsig.table import SIGNATURES, LogEvent, Signature

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_LINE_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)) ")
_PREFIX = re.compile(
    r"(?:\([^()]* pid=\d+\) )?"                                   # vLLM's process, then:
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d"  # vLLM's level header
    r"(?: \[[^\]]*\])? "
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z]+\d+)*\] "  # SGLang's [date TPn],
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+)?"          # its uvicorn's INFO:
    r"|\[rank\d+\]:\[[^\]]*\] "                               # torch's [rankN]:[...]
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+"               # uvicorn's INFO:
    r"|(?!\[)\S+ (?:kernel|[\w.@-]+\[\d+\]): "                # journald's host kernel:
    r")?"
)
"""Every logger prefix in one match (the first alternative that fits wins,
as a walk of them in this order would): ingest runs it on every line. SGLang
gives uvicorn's own lines its date (``[%(asctime)s] %(levelprefix)s
%(message)s``, 0.5.23 ``srt/utils/common.py:3512-3515``), so uvicorn's level
may follow it. The
process group is followed by at most one ``)`` so it matches one way only:
its `` pid=N`` ends at the first parenthesis after the opening one, so the
greedy scan ends where a lazy one would (and costs less)."""
_prefix_end = _PREFIX.match


def _overlapping(a: str, b: str) -> bool:
    """Can occurrences of needles ``a`` and ``b`` overlap in some text?"""
    if a in b or b in a:
        return True
    return any(a.endswith(b[:i]) or b.endswith(a[:i]) for i in range(1, min(len(a), len(b))))


def _trie_regex(words: list[str]) -> str:
    """One regex matching exactly ``words``, factored as a trie (``Load
    weight (?:begin|end)``): Python's re tries every top-level alternative
    at every position, so sharing prefixes makes the scan several times cheaper."""
    trie: dict[str, dict] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, dict]) -> str:
        branches = [re.escape(ch) + build(sub) for ch, sub in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(trie)


_NEEDLES = sorted({s.needle for s in SIGNATURES if s.needle})
_PREFILTER = re.compile(_trie_regex(_NEEDLES))
"""One scan over the signatures' literal needles. What it finds names the
signatures worth trying; a line without any (access logs, chatter) skips the
table, unless it may be a bare ``SomeError: ...`` line (``_EXCEPTION_HINT``)."""
_EXCEPTION_HINT = re.compile(r"^\S*(?:Error|Exception|Interrupt|Exit)\b")
_OVERLAPS: dict[str, tuple[str, ...]] = {
    n: tuple(o for o in _NEEDLES if o != n and _overlapping(n, o)) for n in _NEEDLES}
"""Needles whose occurrences can overlap an occurrence of the key: the scan
(non-overlapping, leftmost) may report only the key, so these are tested
with ``in`` whenever the key is found."""
_BY_NEEDLE: dict[str, tuple[int, ...]] = {
    n: tuple(i for i, s in enumerate(SIGNATURES) if s.needle == n) for n in _NEEDLES}
_NO_NEEDLE = tuple(i for i, s in enumerate(SIGNATURES) if not s.needle)
_PLAN = {n: tuple(sorted(_BY_NEEDLE[n] + _NO_NEEDLE)) for n in _NEEDLES}
"""The signatures to try, in table order, when ``n`` is the only needle found."""
_SEARCH = tuple(s.pattern.search for s in SIGNATURES)
_new = object.__new__

# ---- boring shapes ------------------------------------------------------------
# Most lines of a serving engine are stats and access lines, of a boot progress
# bars. Their whole message is matched in one step against the shapes below
# (literals, choices of literals, and numbers), which says which signatures can
# match without scanning the message for needles.
#
# Exact by construction: no needle holds a digit or a dot (checked below), so
# in a line of a shape every needle lies inside one run of the shape's
# literals between two numbers; the signatures tried are those whose needle is
# in such a run (every combination of the choices), plus the needle-less ones,
# in table order. That is the table walk's first match: a signature whose
# needle is absent cannot match.

NUM = None
"""A number in a shape: ``[0-9.]+``."""
Shape = tuple[str | tuple[str, ...] | None, ...]
_METHODS = ("GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS")
_PATHS = ("/health", "/metrics", "/ping", "/version", "/v1/models", "/v1/chat/completions",
          "/v1/completions", "/v1/embeddings", "/tokenize", "/detokenize", "/load")
_REASONS = ("OK", "Created", "No Content", "Bad Request", "Unauthorized", "Forbidden",
            "Not Found", "Method Not Allowed", "Unprocessable Entity", "Too Many Requests",
            "Internal Server Error", "Service Unavailable")
BORING: tuple[Shape, ...] = (
    # vLLM's loggers.py, every 10 s while serving
    ("Engine ", NUM, ": Avg prompt throughput: ", NUM, " tokens/s, Avg generation throughput: ",
     NUM, " tokens/s, Running: ", NUM, " reqs, Waiting: ", NUM, " reqs, GPU KV cache usage: ",
     NUM, "%, Prefix cache hit rate: ", NUM, "%"),
    # uvicorn's access log (the console's own /health and /metrics among them)
    (NUM, ":", NUM, ' - "', _METHODS, " ", _PATHS, " ", ("HTTP/1.1", "HTTP/1.0"), '" ', NUM,
     " ", _REASONS),
    # SGLang's scheduler
    ("Decode batch, #running-req: ", NUM, ", token usage: ", NUM,
     ", gen throughput (token/s): ", NUM),
    ("Decode batch, #running-req: ", NUM, ", token usage: ", NUM,
     ", gen throughput (token/s): ", NUM, ", #queue-req: ", NUM),
    # SGLang 0.5.23 (metrics_reporter.py:963, pool_stats_observer.py, :1040)
    ("Decode batch, #running-req: ", NUM, ", #token: ", NUM, ", token usage: ", NUM,
     ", cuda graph: ", ("True", "False"), ", gen throughput (token/s): ", NUM,
     ", #queue-req: ", NUM),
    # tqdm's shard progress ({percentage:3.0f}% ... [{elapsed}<{remaining}, {rate_fmt}])
    ("Loading safetensors checkpoint shards:", (" ", "  ", "   "), NUM, "% Completed | ", NUM,
     "/", NUM, " [", NUM, ":", NUM, "<", NUM, ":", NUM, ",", (" ", "  ", "   "), NUM,
     ("s/it]", "it/s]")),
    ("Available KV cache memory: ", NUM, " GiB"),
)


def _shape_regex(shape: Shape) -> str:
    return "".join("[0-9.]+" if p is None else re.escape(p) if isinstance(p, str)
                   else "(?:" + "|".join(map(re.escape, p)) + ")" for p in shape)


def _shape_plan(shape: Shape) -> tuple[int, ...]:
    """The signatures that can match a line of ``shape``, in table order."""
    runs: list[list[str]] = [[""]]
    for p in shape:
        if p is None:
            runs.append([""])
        else:
            runs[-1] = [a + b for a in runs[-1] for b in ((p,) if isinstance(p, str) else p)]
    found = {n for n in _NEEDLES for run in runs for text in run if n in text}
    plan = {i for n in found for i in _BY_NEEDLE[n]}
    return tuple(sorted(plan.union(_NO_NEEDLE) if _may_be_exception(shape) else plan))


def _may_be_exception(shape: Shape) -> bool:
    """Can a line of ``shape`` pass ``_EXCEPTION_HINT`` (the needle-less
    signatures' condition)? Not when its first word has no letter."""
    for p in shape:
        if p is None:
            continue
        for text in (p,) if isinstance(p, str) else p:
            word = text.split(None, 1)[0] if text.strip() else ""
            if any(ch.isalpha() or ch == "_" for ch in word):
                return True
        if all(any(ch.isspace() for ch in text) for text in ((p,) if isinstance(p, str) else p)):
            return False
    return True


if any(ch.isdecimal() or ch == "." for n in _NEEDLES for ch in n):  # pragma: no cover
    raise AssertionError("a needle holds a digit or a dot: the boring shapes are not exact")
_BORING = re.compile("|".join(f"({_shape_regex(shape)})" for shape in BORING))
_BORING_PLAN = ((), *map(_shape_plan, BORING))
"""By the index of the shape's group in ``_BORING``."""
_boring_shape = _BORING.fullmatch
_HEAD = re.compile(f"(?>{_PREFIX.pattern})(?:(?:{_BORING.pattern})\\Z)?")
"""The logger prefix and, when the rest of the line is of a boring shape,
that shape, in one match: the prefix is atomic (``(?>...)``), so it ends where
``_PREFIX.match`` ends whether or not a shape follows; the shapes' groups keep
their numbers (the prefix has none), so ``lastindex`` names the shape as in
``_BORING`` and its group starts where the message does."""
_head = _HEAD.match


def _candidates(msg: str) -> tuple[int, ...]:
    """Table indexes, in table order, of every signature whose needle is in
    ``msg`` (plus the needle-less ones when the line may be an exception).

    Exact: a needle occurrence the scan skipped overlaps an occurrence it
    reported, and every needle that can overlap a reported one is tested."""
    hits = _PREFILTER.findall(msg)
    if not hits:
        return _NO_NEEDLE if _EXCEPTION_HINT.search(msg) else ()
    first = hits[0]
    if len(hits) == 1 and not _OVERLAPS[first]:
        return _PLAN[first]
    found = set(hits)
    for needle in hits:
        found.update(o for o in _OVERLAPS[needle] if o not in found and o in msg)
    return tuple(sorted({i for n in found for i in _BY_NEEDLE[n]}.union(_NO_NEEDLE)))


def split_timestamp(line: str) -> tuple[str | None, str]:
    """Split a leading RFC 3339 timestamp: docker ``--timestamps``
    (``2026-11-29T01:02:03.123456789Z msg``) or journald ``short-iso-precise``
    (``2026-11-29T01:02:03.456789+0000 host kernel: msg``)."""
    m = _LINE_TS.match(line)
    if m is None:
        return None, line
    return m.group(1), line[m.end():]


def clean(line: str) -> str:
    """Strip ANSI codes, tqdm carriage returns and trailing blanks; keep what
    a terminal would show last (the final ``\\r``-separated update)."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    line = line.rstrip("\r\n\t ")
    if "\r" in line:
        last = line.rpartition("\r")[2]
        if last.strip():  # the usual redraw: the last one is what shows
            return last
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    return line


def strip_prefixes(text: str) -> str:
    """Remove logger prefixes (vLLM process and level headers, SGLang's
    ``[date TPn]``, uvicorn's ``INFO:``, journald's ``date host kernel:``)."""
    end = _prefix_end(text).end()  # type: ignore[union-attr]  # every part optional
    return text[end:] if end else text


def _text_of(line: str) -> str:
    """A line without its docker timestamp, ANSI codes, redraws and
    trailing blanks: what the logger prefix and the signatures are matched in."""
    if line[:1].isdigit():
        _, line = split_timestamp(line)
    # clean(line), without a call for the common line (no ANSI code, no redraw)
    return clean(line) if "\x1b" in line or "\r" in line else line.rstrip("\n\t ")


def message_of(line: str) -> str:
    """The message the signatures are matched against: the line without its
    timestamp, ANSI codes, progress-bar redraws and logger prefixes."""
    text = _text_of(line)
    return strip_prefixes(text) if text else ""


class _Fields(Mapping[str, str]):
    """The named groups a signature's match captured, not None, found when
    first read: most events (stats lines) are never asked for theirs, and the
    search and its ``groupdict`` were half the cost of classifying one."""

    __slots__ = ("_found", "_msg", "_search")

    def __init__(self, search: Callable[[str], re.Match[str] | None], msg: str) -> None:
        self._search, self._msg = search, msg
        self._found: dict[str, str] | None = None

    def _dict(self) -> dict[str, str]:
        found = self._found
        if found is None:
            m = self._search(self._msg)
            found = {} if m is None else m.groupdict()
            if None in found.values():  # an optional group that did not take part
                found = {k: v for k, v in found.items() if v is not None}
            self._found = found
        return found

    def __getitem__(self, key: str) -> str:
        return self._dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def __contains__(self, key: object) -> bool:
        return key in self._dict()

    def get(self, key: str, default: Any = None) -> Any:
        return self._dict().get(key, default)

    def __repr__(self) -> str:
        return repr(self._dict())


def event_of(sig: Signature, msg: str) -> LogEvent:
    """The event of ``sig``, which matches ``msg`` (its fields read when asked)."""
    # What LogEvent(sig.kind, ...) builds, without the frozen dataclass's
    # __init__ (one object.__setattr__ per field).
    ev = _new(LogEvent)
    d = ev.__dict__
    d["kind"], d["severity"], d["phase"], d["fields"], d["text"] = \
        sig.kind, sig.severity, sig.phase, _Fields(sig.pattern.search, msg), msg
    return ev


_MASK = bytes.maketrans(b"123456789", b"000000000")
ROUTES_KEPT = 4096
"""Routes remembered (``_masked_route``): the line shapes of a few busy
engines, with room for chatter; least recently used go first."""
ROUTE_KEY_MAX = 512
"""Longer lines (tracebacks' source lines, huge errors) are routed afresh."""


def _route(text: str) -> tuple[int, int] | None:
    """Where the message of a cleaned line starts and the index of the first
    signature it matches, in table order; None when none does."""
    head = _head(text)  # every part optional: it always matches
    shape = head.lastindex  # type: ignore[union-attr]
    if shape is None:
        start = head.end()  # type: ignore[union-attr]
        if start == len(text):
            return None
        plan = _candidates(text[start:] if start else text)
    else:
        plan = _BORING_PLAN[shape]
        if not plan:
            return None
        start = head.start(shape)  # type: ignore[union-attr]
    msg = text[start:] if start else text
    for i in plan:
        if _SEARCH[i](msg) is not None:
            return start, i
    return None


@lru_cache(maxsize=ROUTES_KEPT)
def _masked_route(key: bytes) -> tuple[int, int] | None:
    """The route of a line with every digit made ``0`` (``_MASK``).

    It is the route of every line with that key: the timestamp, ANSI, prefix
    and signature patterns treat all ASCII digits alike (each matches all
    ten or none, no literal digit; tests/core/test_logsig_memo.py checks
    every one), and so does ``_text_of``'s code, so a line and its masked
    copy clean to texts of one length whose messages start at one offset and
    match the same signatures. The shapes and the needle scan only shorten
    the walk (their verdict is the walk's). Stats, access and progress lines
    differ in their numbers only, so one route serves all of an engine's
    lines of one kind, and a line of no interest costs a lookup."""
    return _route(_text_of(key.decode("utf-8", "surrogatepass")))


def classify(line: str) -> LogEvent | None:
    """Classify one log line (docker timestamp already split off or not).

    Returns None for lines that mean nothing to the watchers. Never raises.
    """
    try:
        if not isinstance(line, str):
            return None
        key = line.encode("utf-8", "surrogatepass")
        if len(key) <= ROUTE_KEY_MAX:
            route = _masked_route(key.translate(_MASK))
            if route is None:
                return None
            text = _text_of(line)
        else:
            text = _text_of(line)
            route = _route(text)
            if route is None:
                return None
        start, i = route
        return event_of(SIGNATURES[i], text[start:] if start else text)
    except (RecursionError, MemoryError):  # pragma: no cover - pathological input
        return None
