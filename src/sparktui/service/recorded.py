"""Reading a night's recording back (service/recording.py writes it): for
``sparktui replay`` without decoding the night, and whole for a bundle.

A recording is untrusted input. It is read member by member (each flush is
one gzip member); a member that does not decompress is skipped to the next
gzip header and counted, a line past `MAX_LINE` is skipped without being
held, blank lines cost no per-line work, and what is decompressed at a time
is bounded (a decompression bomb stays bounded in memory and linear in time).

`open_sessions` indexes the file: per event line its recorded time (finite,
an epoch before `MAX_T`, never more than `MAX_AHEAD_S` past the one before),
its class and its route (the node, lane or rank it is about), plus where the
line lies (its member's file offset, its offset in the member). For the
members the writer's index vouches for (service/recordindex.py: a sidecar the
`Recorder` appends to at each member) these come from it and nothing is
decompressed; from the first member it does not vouch for to the end of the
file, each line's canonical start says them (a line that is not in the
writer's form is parsed at once). Both give the same entries, so a missing
or spoiled index costs only speed. An event is decoded, and its schema
checked (service/codec.py), only when the replay needs it, and a line that
does not say what its entry said is counted, never replayed; a member that
no longer decompresses then (one the index covered, so not read to open) is
counted once as a damaged piece. Each console or sentinel run is a session:
a ``session`` line starts one, and so does a time far behind the last (a
file written before runs were marked).
"""

from __future__ import annotations

import json
import logging
import math
import re
import typing
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from sparktui.service.codec import EVENTS, SchemaError, decode
from sparktui.service.events import (
    LaneChanged,
    LaneGone,
    LogLinesArrived,
    NodeSampled,
    ServiceEvent,
)
from sparktui.service.recordindex import trusted_records

log = logging.getLogger(__name__)

CHUNK = 1 << 20
"""Bytes read, and decompressed, at a time (a decompression bomb stays bounded)."""
MAX_LINE = 1 << 20
"""A longer line is not an event: skipped, counted."""
MAX_T = 1e11
"""Epoch seconds past this (year 5138) are not a recorded time."""
MAX_AHEAD_S = 12 * 3600.0
"""A recorded time this far past the one before it in its session is not a
recorded time (a night is shorter) when the next one is back near the one
before; when the next one follows it, the run went on from there (a host
that slept): a new session."""
SESSION_GAP_S = 60.0
"""A recorded time this far behind the one before starts a new session (a
file written before runs were marked: two demo runs' simulated clocks overlap)."""
MEMBERS_CACHED = 8
"""Members whose event lines are kept decompressed (a replay reads on in order)."""
DECODED_KEPT = 8192
"""Events kept decoded (the newest asked for): a seek back into ground the
replay has just played folds them again without decoding them again (most
are the very objects the folded state holds)."""
MAX_MEMBER_BYTES = 64 << 20
"""Event lines one member may hold (a flush holds a few seconds of events):
a larger member is counted as damaged, its events skipped."""
_MAGIC = b"\x1f\x8b\x08"
_KINDS = {cls.__name__ for cls in EVENTS}
_START = re.compile(rb'\{"t":(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?),"e":\{"\$":"(\w+)",')
_NAME = rb'"([^"\\]*)"'
_ROUTES = {
    "NodeSampled": re.compile(rb'"snapshot":\{"\$":"NodeSnapshot","node":' + _NAME),
    "LaneChanged": re.compile(rb'"lane":\{"\$":"LaneView","name":' + _NAME),
    "LaneGone": re.compile(rb'"name":' + _NAME),
    "LogLinesArrived": re.compile(rb'"lane":' + _NAME + rb',"rank":(-?(?:0|[1-9]\d*))'),
}
"""The writer's form of each routed event's start (service/codec.py encodes
fields in their dataclass order, compactly)."""


@dataclass
class Damage:
    """What a read skipped: whole gzip members that did not decompress,
    lines that were not events (too long, not JSON, wrong fields, a time
    that is not a finite epoch), and whether the last member was torn."""

    pieces: int = 0
    lines: int = 0
    torn_end: bool = False

    def __bool__(self) -> bool:
        return bool(self.pieces or self.lines or self.torn_end)

    def describe(self) -> str:
        parts = []
        if self.pieces:
            parts.append(f"{self.pieces} damaged piece{'s' * (self.pieces != 1)} skipped")
        if self.lines:
            what = "lines that are not events" if self.lines != 1 else "line that is not an event"
            parts.append(f"{self.lines} {what}")
        if self.torn_end:
            parts.append("the last piece is torn (still being written, or cut)")
        return "; ".join(parts)


def route(ev: ServiceEvent) -> str:
    """What an event is about, for a fold that keeps the last of each: the
    node, the lane, or the lane and rank (other events: empty)."""
    if isinstance(ev, NodeSampled):
        return ev.snapshot.node
    if isinstance(ev, LaneChanged):
        return ev.lane.name
    if isinstance(ev, LaneGone):
        return ev.name
    if isinstance(ev, LogLinesArrived):
        return f"{ev.lane}\n{ev.rank}"
    return ""


Span = tuple[int, int, int]
"""Where a line lies: its member's file offset, its offset and length in the member."""


class Recorded(Sequence[tuple[float, ServiceEvent | None]]):
    """One session's events in recorded-time order: each one's time, class
    name and route known, the event itself decoded when asked for (None: it
    did not decode; counted in ``damage`` once)."""

    def __init__(self, path: Path | None, times: list[float], kinds: list[str],
                 keys: list[str], where: list[Span | ServiceEvent], damage: Damage) -> None:
        self.path = path
        self.times = times
        self.kinds = kinds
        self.keys = keys
        self._where = where
        self.damage = damage
        self._failed: set[int] = set()
        self._broken: set[int] = set()
        """Members that no longer decompress (counted once in ``damage.pieces``)."""
        self._decoded: OrderedDict[int, ServiceEvent] = OrderedDict()
        self._members: OrderedDict[int, dict[int, bytes]] = OrderedDict()
        self._spans: dict[int, list[tuple[int, int]]] = {}
        for w in where:
            if isinstance(w, tuple):
                self._spans.setdefault(w[0], []).append((w[1], w[2]))

    @classmethod
    def of(cls, events: Sequence[tuple[float, ServiceEvent]]) -> Recorded:
        """Events already decoded (a night held in memory)."""
        return cls(None, [t for t, _ in events], [type(e).__name__ for _, e in events],
                   [route(e) for _, e in events], [e for _, e in events], Damage())

    def __len__(self) -> int:
        return len(self.times)

    def __getitem__(self, i: int) -> tuple[float, ServiceEvent | None]:  # type: ignore[override]
        return self.times[i], self.event(i)

    def event(self, i: int) -> ServiceEvent | None:
        where = self._where[i]
        if not isinstance(where, tuple):
            return where
        if (ev := self._decoded.get(i)) is not None:
            self._decoded.move_to_end(i)
            return ev
        if i in self._failed:
            return None
        if where[0] in self._broken:
            self._failed.add(i)
            return None
        try:
            line = self._line(where)
        except (OSError, zlib.error) as exc:  # damage the index did not see (its writer's)
            self._broken.add(where[0])
            self._failed.add(i)
            self.damage.pieces += 1
            log.debug("recording member at %d skipped: %r", where[0], exc)
            return None
        try:
            t, ev, _ = _parse(line)
            if t != self.times[i] or ev is None or type(ev).__name__ != self.kinds[i] \
                    or route(ev) != self.keys[i]:
                raise SchemaError("the line does not say what its start said")
            self._decoded[i] = ev
            if len(self._decoded) > DECODED_KEPT:
                self._decoded.popitem(last=False)
            return ev
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            self._failed.add(i)
            self.damage.lines += 1
            log.debug("recording line skipped: %r", exc)
            return None

    def _line(self, where: Span) -> bytes:
        member, offset, _ = where
        lines = self._members.get(member)
        if lines is None:
            assert self.path is not None
            lines = self._members[member] = _member_lines(self.path, member, self._spans[member])
            if len(self._members) > MEMBERS_CACHED:
                self._members.popitem(last=False)
        else:
            self._members.move_to_end(member)
        return lines[offset]


def _member_lines(path: Path, member: int, spans: list[tuple[int, int]]) -> dict[int, bytes]:
    """The indexed lines of the member at ``member``, by offset, decompressed
    no further than the last of them."""
    out: dict[int, bytes] = {}
    end = max(o + n for o, n in spans)
    todo = sorted(spans)
    next_ = 0
    buf = bytearray()
    base = 0  # member offset of buf[0]
    d = zlib.decompressobj(31)
    with open(path, "rb") as f:
        f.seek(member)
        while next_ < len(todo) and base + len(buf) < end and not d.eof:
            data = d.unconsumed_tail or f.read(CHUNK)
            more = d.decompress(data, CHUNK)  # with no new byte: what zlib still holds
            if not data and not more:
                break
            buf += more
            while next_ < len(todo) and sum(todo[next_]) <= base + len(buf):
                o, n = todo[next_]
                next_ += 1
                out[o] = bytes(buf[o - base:o - base + n])
            keep = min(todo[next_][0] - base, len(buf)) if next_ < len(todo) else len(buf)
            del buf[:keep]
            base += keep
    if next_ < len(todo):
        raise OSError(f"member at {member} no longer reads as it did")
    return out


def open_sessions(path: Path, damage: Damage | None = None) -> list[Recorded]:
    """The recording's sessions, indexed (see the module's doc); what was
    skipped is counted in ``damage`` (logged as one warning when none is
    passed)."""
    own = damage is None
    seen = Damage() if damage is None else damage
    sessions: list[tuple[list[float], list[str], list[str], list[Span | ServiceEvent]]] = []
    cur: tuple[list[float], list[str], list[str], list[Span | ServiceEvent]] = ([], [], [], [])
    last: float | None = None
    ahead: tuple[float, str, str, Span | ServiceEvent] | None = None
    """An entry far past the one before, until the next tells whether the run
    went on from there (a host asleep) or it was no recorded time."""
    with open(path, "rb") as f:
        for entry in _entries(path, f, seen):
            if isinstance(entry, float):  # a run began
                seen.lines += ahead is not None  # the last of a run, far past it
                if cur[0]:
                    sessions.append(cur)
                cur, last, ahead = ([], [], [], []), None, None
                continue
            if ahead is not None:
                assert last is not None
                if last - SESSION_GAP_S <= entry[0] <= last + MAX_AHEAD_S:
                    seen.lines += 1  # back where it was: that was no recorded time
                else:
                    sessions.append(cur)
                    cur = ([], [], [], [])
                    _add(cur, ahead)
                    last = ahead[0]
                ahead = None
            t = entry[0]
            if last is not None and t > last + MAX_AHEAD_S:
                ahead = entry
                continue
            if last is not None and t < last - SESSION_GAP_S and cur[0]:
                sessions.append(cur)
                cur = ([], [], [], [])
            last = t
            _add(cur, entry)
    seen.lines += ahead is not None
    if cur[0]:
        sessions.append(cur)
    totals: dict[int, int] = {}
    for session in sessions:
        for w in session[3]:
            if isinstance(w, tuple):
                totals[w[0]] = totals.get(w[0], 0) + w[2]
    too_big = {m for m, n in totals.items() if n > MAX_MEMBER_BYTES}
    seen.pieces += len(too_big)
    if own and seen:
        log.warning("recording %s: %s", path, seen.describe())
    out = []
    for times, kinds, keys, places in sessions:
        order = [i for i in sorted(range(len(times)), key=times.__getitem__)  # stable: jitter
                 if not _inside(places[i], too_big)]
        if order:
            out.append(Recorded(path, [times[i] for i in order], [kinds[i] for i in order],
                                [keys[i] for i in order], [places[i] for i in order], seen))
    return out


Entry = tuple[float, str, str, Span | ServiceEvent]


def _entries(path: Path, f: IO[bytes], damage: Damage) -> Iterator[Entry | float]:
    """Every index entry of the file in order (`_entry`'s, or the time alone
    where a run began): those of the members the writer's index covers
    (service/recordindex.py) from it, the same as their lines would give, and
    the rest from the decompressed lines."""
    end = 0
    for record in trusted_records(path, f.fileno()):
        offset = 0
        for item in record.items:
            n = item if isinstance(item, int) else item[-1]
            if n > MAX_LINE:
                damage.lines += 1
            elif isinstance(item, list):
                t = item[0]
                try:
                    if type(t) is not float or not 0 <= t <= MAX_T:  # (a float: finite)
                        t = _time(t)
                except ValueError as exc:
                    damage.lines += 1
                    log.debug("recording line skipped: %r", exc)
                else:
                    yield t if len(item) == 2 else (
                        t, record.kinds[item[1]], record.routes[item[2]], (record.at, offset, n))
            offset += n + 1
        end = record.end
    f.seek(end)
    for member, offset, line in _lines(f, damage, end):
        try:
            entry = _entry(member, offset, line)
        except (ValueError, TypeError, KeyError, RecursionError) as exc:
            damage.lines += 1
            log.debug("recording line skipped: %r", exc)
            continue
        if entry is not None:
            yield entry


def _add(session: tuple[list[float], list[str], list[str], list[Span | ServiceEvent]],
         entry: tuple[float, str, str, Span | ServiceEvent]) -> None:
    times, kinds, keys, places = session
    t, kind, key, place = entry
    times.append(t)
    kinds.append(kind)
    keys.append(key)
    places.append(place)


def _inside(where: Span | ServiceEvent, members: set[int]) -> bool:
    return isinstance(where, tuple) and where[0] in members


def _entry(member: int, offset: int, line: bytes
           ) -> tuple[float, str, str, Span | ServiceEvent] | float | None:
    """A line's index entry: its time, class, route and where it lies (a line
    in the writer's form) or its event (parsed now); the time alone where a
    run began; None for a line that holds no event (a gap or end line)."""
    m = _START.match(line)
    if m is not None and (kind := m.group(2).decode()) in _KINDS:
        key = _route(kind, line, m.end())
        if key is not None:
            return _time(float(m.group(1))), kind, key, (member, offset, len(line))
    t, ev, begins = _parse(line)
    if ev is None:
        return t if begins else None
    return t, type(ev).__name__, route(ev), ev


def _route(kind: str, line: bytes, at: int) -> str | None:
    """The route of a line in the writer's form (None: not in that form)."""
    pattern = _ROUTES.get(kind)
    if pattern is None:
        return ""
    m = pattern.match(line, at)
    if m is None:
        return None
    key = m.group(1).decode("utf-8", "replace")
    return f"{key}\n{int(m.group(2))}" if kind == "LogLinesArrived" else key


def _parse(line: bytes) -> tuple[float, ServiceEvent | None, bool]:
    """A whole line: its time, its event (None: a line that holds none) and
    whether it says a run began."""
    data = json.loads(line)
    if not isinstance(data, dict):
        raise TypeError("not an object")
    t = _time(data.get("t"))
    if "e" not in data:
        return t, None, "session" in data
    ev = decode(data["e"])
    if not isinstance(ev, EVENTS):
        raise TypeError(f"not a service event: {type(ev).__name__}")
    return t, typing.cast(ServiceEvent, ev), False


def _time(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or not 0 <= value <= MAX_T:
        raise ValueError(f"t={value!r} is not a recorded time")
    return float(value)


def read_sessions(path: Path, damage: Damage | None = None
                  ) -> list[list[tuple[float, ServiceEvent]]]:
    """Every session of a recording, decoded (a bundle's whole night)."""
    out = []
    for s in open_sessions(path, damage):
        decoded = [(t, ev) for t, ev in s if ev is not None]
        if decoded:
            out.append(decoded)
    return out


def read_recording(path: Path, damage: Damage | None = None
                   ) -> Iterator[tuple[float, ServiceEvent]]:
    """Every event of a recording, session after session, each in time order.
    What was skipped is counted in ``damage``; when the caller passes none,
    the count is logged as one warning at the end."""
    own = damage is None
    seen = Damage() if damage is None else damage
    for s in read_sessions(path, seen):
        yield from s
    if own and seen:
        log.warning("recording %s: %s", path, seen.describe())


def _pieces(f: IO[bytes], damage: Damage, at: int) -> Iterator[tuple[int, bytes | None]]:
    """Decompressed bytes member after member from file offset ``at`` (where
    ``f`` stands), each with its member's file offset: b"" where a member
    ended whole, None where one broke off (its partial last line is not a
    line). A member that fails is skipped from its start to the next gzip
    header."""
    base = at  # file offset of pending[0]
    pending = b""
    start = at  # file offset of the current member
    d = zlib.decompressobj(31)
    fresh = True  # d has taken no byte
    full = False  # the last output filled CHUNK: d may hold more
    resyncing = False
    while True:
        if not pending and not full:
            pending = f.read(CHUNK)
            if not pending:
                if not fresh:
                    damage.torn_end = True
                    yield start, None
                return
        data = pending
        try:
            out = d.decompress(data, CHUNK)
        except zlib.error:
            if not resyncing:
                damage.pieces += 1
            resyncing = True
            yield start, None
            start, pending = _resync(f, start + 1)
            base, d, fresh, full = start, zlib.decompressobj(31), True, False
            continue
        fresh = False
        full = len(out) == CHUNK
        if out:
            yield start, out
        if d.eof:
            yield start, b""
            rest = d.unused_data
            base += len(data) - len(rest)
            pending, start, d, fresh, resyncing = rest, base, zlib.decompressobj(31), True, False
            full = False
            if not pending.strip(b"\0"):  # zero padding (a cut-back file) is no member
                pending = b""
        else:
            rest = d.unconsumed_tail
            base += len(data) - len(rest)
            pending = rest


def _resync(f: IO[bytes], at: int) -> tuple[int, bytes]:
    """The next gzip header at or after file offset ``at`` and the bytes from it
    (empty at the end of the file)."""
    f.seek(at)
    carry = b""
    while True:
        chunk = f.read(CHUNK)
        if not chunk:
            return at + len(carry), b""
        data = carry + chunk
        i = data.find(_MAGIC)
        if i >= 0:
            return at + i, data[i:]
        keep = len(_MAGIC) - 1
        at += len(data) - keep
        carry = data[-keep:]


def _lines(f: IO[bytes], damage: Damage, origin: int) -> Iterator[tuple[int, int, bytes]]:
    """Each non-blank line from file offset ``origin`` (where ``f`` stands) with
    its member's file offset and its offset in the member's decompressed
    bytes. A member's end ends a line."""
    member = -1
    pos = 0  # decompressed bytes of the member so far
    partial = b""
    at = 0  # member offset of partial[0]
    skipping = False  # inside a line past MAX_LINE
    for start, piece in _pieces(f, damage, origin):
        if start != member:
            member, pos, partial, at, skipping = start, 0, b"", 0, False
        if piece is None or not piece:
            if piece is not None and partial.strip() and not skipping:
                yield member, at, partial
            member = -1  # what follows is another member (or the same one, resynced)
            continue
        if not partial and not piece.strip():
            pos += len(piece)
            at = pos
            skipping = skipping and b"\n" not in piece
            continue  # blank lines: no per-line work
        *whole, last = (partial + piece).split(b"\n")
        off = at
        for line in whole:
            if skipping:
                skipping = False
            elif len(line) > MAX_LINE:
                damage.lines += 1
            elif line.strip():
                yield member, off, line
            off += len(line) + 1
        partial, at = last, off
        pos += len(piece)
        if len(partial) > MAX_LINE:
            if not skipping:
                damage.lines += 1
            partial, at, skipping = b"", pos, True
