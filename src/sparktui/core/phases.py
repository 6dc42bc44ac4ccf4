"""The boot-phase tracker of one lane, fed the log lines of all its ranks.

starting -> loading weights (shard i/N, rate, ETA) -> KV
allocation (pool tokens, concurrency) -> graph capture -> API starting ->
serving; or failed (first fatal line of any rank, with the lines before it)
or stalled.

There is deliberately no total timeout: a lane is *stalled* only when no
progress at all (a progress line, a phase change, or progress noted from
outside such as bytes loaded or a port opening) arrived for
``stall_after_s``. That holds in every phase until the endpoint is confirmed
(``ready``): a log that says "startup complete" while the endpoint stays
silent stalls like any other phase. A 40-120 minute cold load that keeps printing shards, or
keeps reading bytes, is never stalled or failed (the seed's 1800 s wait that
killed healthy loads cannot happen here). Times are passed in by the caller
(pure code, injectable clock).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Protocol

from sparktui.core.enginetime import engine_time
from sparktui.core.failure import AFTER_LINES, GENERIC_FATAL, Failure, cause_rank, earlier
from sparktui.core.loadprogress import (
    READ,
    SHARDS,
    TENSORS,
    LoadProgress,
    eta_s,
    per_second,
    slowest,
)
from sparktui.core.logsig import (
    BOOT_ORDER,
    Kind,
    LogEvent,
    Phase,
    Severity,
    classify,
    parse_float,
    parse_int,
    parse_mib,
    parse_timestamp,
    split_timestamp,
)
from sparktui.core.measured import memory_figure


class Line(Protocol):
    """A log line as the follower delivers it (watch/follower.LogLine)."""

    @property
    def ts(self) -> str | None: ...
    @property
    def text(self) -> str: ...


class _Fed(NamedTuple):
    """One line handed to :meth:`PhaseTracker.feed`, as a `Line`."""

    ts: str | None
    text: str


_TQDM_TIME = re.compile(r"^(?:(\d+):)?(\d+):(\d\d)$")
_BOOT_INDEX = {ph: i for i, ph in enumerate(BOOT_ORDER)}
# The members the per-line path tests, as globals: an enum member's attribute
# lookup (``Kind.TRACEBACK``) costs ten times a global's on Python 3.11.
_INFO, _PROGRESS, _FATAL = Severity.INFO, Severity.PROGRESS, Severity.FATAL
_TRACEBACK, _EXCEPTION, _SHARD = Kind.TRACEBACK, Kind.EXCEPTION, Kind.LOAD_SHARD
_BYTES, _TENSORS = Kind.LOAD_BYTES, Kind.LOAD_TENSORS
_KV_CACHE, _KV_CONCURRENCY, _KV_MEMORY = Kind.KV_CACHE, Kind.KV_CONCURRENCY, Kind.KV_MEMORY
_GRAPH, _GRAPH_DONE = Kind.GRAPH_CAPTURE, Kind.GRAPH_DONE
_FAILED, _STALLED, _SERVING = Phase.FAILED, Phase.STALLED, Phase.SERVING
_TRACEBACK_WINDOW = 400
"""An exception line ends a traceback if it comes within this many lines."""


@dataclass(frozen=True)
class KvInfo:
    tokens: int | None = None
    max_len: int | None = None
    concurrency: float | None = None


def _engine(body: str, ts: str | None, ev: LogEvent | None) -> float | None:
    """The engine's stamp of a line that may fail the lane (only those are parsed)."""
    if ev is None or (ev.severity is not _FATAL and ev.kind is not _EXCEPTION):
        return None
    return engine_time(body, ts)


@dataclass
class _Shards:
    first_t: float
    first_done: int
    done: int
    total: int
    last_ts: str | None
    """Docker's stamp on the latest shard line (parsed when asked: ingest
    reads every progress redraw), else ``last_now``, when it was read."""
    last_now: float
    tqdm_remaining: str | None
    measure: str = SHARDS
    """SHARDS, TENSORS, or READ: MiB of a byte bar."""

    @property
    def last_t(self) -> float:
        t = parse_timestamp(self.last_ts)
        return self.last_now if t is None else t

    def progress(self, rank: int) -> LoadProgress:
        """The bar's rate and ETA from its stamps, else tqdm's own remaining time."""
        rate = per_second(self.done - self.first_done, self.first_t, self.last_t)
        eta = eta_s(self.done, self.total, rate) if rate \
            else _tqdm_seconds(self.tqdm_remaining)
        return LoadProgress(rank, self.done, self.total, rate, eta, self.measure)


@dataclass
class _Rank:
    recent: deque[str]
    shards: _Shards | None = None
    traceback_line: int | None = None
    kv_seen: bool = False
    """The rank printed a KV line (memory, pin, size): its graph capture now is the real one."""
    lines: int = 0
    read_at: float = 0.0
    read_ts: str | None = None
    """When the rank's latest timestamped line was read (monotonic) and
    docker's stamp on it."""
    offset: float | None = None
    """Monotonic minus the node's epoch, as read with the least delay: the
    least over earlier reads of read time minus the stamp of the last line
    (the newest, so the least delayed, of its batch)."""

    def least_offset(self) -> float | None:
        """``offset`` with the latest read counted (one stamp parsed per batch:
        :meth:`PhaseTracker.feed` calls it when a line is read at a new time)."""
        last = parse_timestamp(self.read_ts)
        if last is None:
            return self.offset
        here = self.read_at - last
        return here if self.offset is None or here < self.offset else self.offset

    def read_time(self, logged: float) -> float | None:
        """The monotonic time of the epoch time ``logged`` on the rank's node,
        as the least delayed of its reads maps one to the other."""
        offset = self.least_offset()
        return None if offset is None else logged + offset



@dataclass
class PhaseTracker:
    """Tracks one lane's boot. Feed it every line from every rank."""

    lane: str
    stall_after_s: float
    start: float
    """Monotonic time the watch began (counts as the first progress)."""
    context_lines: int = 20
    phase: Phase = Phase.STARTING
    failure: Failure | None = None
    kv: KvInfo = field(default_factory=KvInfo)
    last_progress_at: float = 0.0
    last_progress: str = "watch started"
    phase_times: dict[Phase, float] = field(default_factory=dict)
    """Monotonic time each phase was first reached, as the tracker learnt it
    (lines read in one batch share it; :meth:`stage_seconds` has the log's)."""
    ready: bool = False
    """The endpoint was confirmed to be this lane's (see :meth:`mark_serving`)."""
    memory_gib: dict[str, float] = field(default_factory=dict)
    """What the engine printed of its memory, per rank 0 line when it has one (else
    the first rank's): ``weights``, ``kv`` and ``graphs`` as core/measured.py's
    `memory_figure` reads them from either engine's lines, and keeps them."""
    _ranks: dict[int, _Rank] = field(default_factory=dict, init=False)
    _before_stall: Phase | None = field(default=None, init=False)
    _logged: dict[Phase, tuple[_Rank, float]] = field(default_factory=dict, init=False)
    """The rank and log time (epoch seconds) of the line that reached a phase."""

    def __post_init__(self) -> None:
        self.last_progress_at = self.start
        self.phase_times.setdefault(self.phase, self.start)

    # ---- input -------------------------------------------------------------
    def feed(self, rank: int, line: str, now: float, ts: str | None = None) -> LogEvent | None:
        """One log line of ``rank``: raw (docker timestamp prefix allowed), or
        already split by the follower (``ts`` given, ``line`` without it)."""
        return self.feed_lines(rank, (_Fed(ts, line),), now)[0]

    def feed_lines(self, rank: int, lines: Sequence[Line], now: float
                   ) -> list[LogEvent | None]:
        """Lines of ``rank`` read together at ``now`` (the follower's, ``ts``
        split off or None): what :meth:`feed` of each in turn does and returns,
        with the per-line bookkeeping done once (the rank's state, its read
        time: nothing reads them between two lines of the call)."""
        if not lines:
            return []
        st = self._ranks.get(rank) or self._rank(rank)
        recent = st.recent.append
        n = st.lines
        last_ts = None
        failed = self.failure is not None
        out: list[LogEvent | None] = []
        add = out.append
        for line in lines:
            ts = line.ts
            if ts is None:
                ts, body = split_timestamp(line.text)
                if ts is not None:
                    last_ts = ts
            else:
                body = line.text
                last_ts = ts
            ev = classify(body)
            n += 1
            if failed:
                st.lines = n
                ev = self._after_failure(rank, st, body, ts, ev)
            elif ev is None:
                recent(body.rstrip("\r\n"))
            else:
                if ev.severity is not _INFO:  # stats and banners change nothing
                    st.lines = n
                    self._apply(rank, st, ev, ts, now, _engine(body, ts, ev), body)
                    failed = self.failure is not None
                recent(ev.text)
            add(ev)
        st.lines = n
        if last_ts is not None:  # as feed() of the first stamped line does, then of the last
            if now != st.read_at and st.read_ts is not None:
                st.offset = st.least_offset()
            st.read_at, st.read_ts = now, last_ts
        return out

    def feed_redraw(self, rank: int, text: str, now: float, ts: str | None) -> bool:
        """The latest redraw of a load bar whose line is still open (the
        follower's OpenLine: docker logged a 16 KiB piece of it): its load
        progress, nothing else. Not a line: not counted, not kept as context,
        not read for time; the whole line follows. True when it was a bar's."""
        ev = classify(text)
        if ev is None or self.failure is not None or not (
                ev.kind is _SHARD or ev.kind is _BYTES or ev.kind is _TENSORS):
            return False
        self._apply(rank, self._rank(rank), ev, ts, now, body=text)
        return True

    def _after_failure(self, rank: int, st: _Rank, body: str, ts: str | None,
                       ev: LogEvent | None) -> LogEvent | None:
        f = self.failure
        assert f is not None
        if ev is not None and ev.severity is _FATAL and rank != f.rank:
            engine = _engine(body, ts, ev)
            if earlier(ts, engine, rank, f):
                # Ranks' streams arrive in any order: the lane's first fatal line is
                # the earliest by the engines' clocks (a worker's LocalEntryNotFoundError,
                # not rank 0's "Worker proc died" that it caused).
                self.failure = Failure(rank, ev.kind, ev.text, ts, tuple(st.recent),
                                       engine_time=engine)
                st.recent.append(ev.text)
                return ev
        if rank == f.rank and len(f.after) < AFTER_LINES:
            text = ev.text if ev is not None else body.rstrip("\r\n")
            cause, rank_of, kind = f.cause, f.cause_rank, f.cause_kind
            if f.kind in GENERIC_FATAL and ev is not None and rank_of < 3:
                better = cause_rank(ev)
                if better > rank_of or (better == 2 and rank_of == 2):
                    cause, rank_of, kind = ev.text.strip(), better, ev.kind
            self.failure = replace(f, after=(*f.after, text), cause=cause, cause_rank=rank_of,
                                   cause_kind=kind)
        return ev

    def feed_event(self, rank: int, ev: LogEvent, now: float, ts: str | None = None) -> None:
        """An event that did not come from a log line (e.g. a container exit,
        ``ts`` its FinishedAt): it is the lane's failure unless an earlier
        fatal line of any rank is known; after a generic fatal line of the same
        rank, it is that line's cause when it says why better (`cause_rank`)."""
        f = self.failure
        if f is not None and ev.fatal and rank != f.rank and earlier(ts, None, None, f):
            self.failure = Failure(rank, ev.kind, ev.text, ts, tuple(self._rank(rank).recent))
            return
        if f is not None and rank == f.rank and f.kind in GENERIC_FATAL \
                and (better := cause_rank(ev)) > f.cause_rank:
            # the rank's generic line ("Engine core proc died unexpectedly") said
            # that it died; evidence from outside its log (the kernel's OOM kill
            # of its container, core/oomkill.py) says why
            self.failure = replace(f, cause=ev.text, cause_rank=better, cause_kind=ev.kind)
            return
        self._apply(rank, self._rank(rank), ev, ts, now)

    def note_progress(self, what: str, now: float) -> None:
        """Progress seen outside the log (bytes read, port opened, health)."""
        self._progress(what, now)

    def check_stall(self, now: float) -> bool:
        """Mark the lane stalled if no progress for ``stall_after_s`` (a
        serving log whose endpoint is not confirmed stalls too)."""
        if self.phase in (Phase.FAILED, Phase.STALLED) or self.ready:
            return self.phase is Phase.STALLED
        if now - self.last_progress_at >= self.stall_after_s:
            self._before_stall = self.phase
            self._set_phase(Phase.STALLED, now)
            return True
        return False

    def mark_serving(self, now: float) -> None:
        """The endpoint answered every readiness stage and proved to be this lane's."""
        self._progress("endpoint ready", now)
        self.ready = True
        self._advance(Phase.SERVING, now)

    # ---- output ------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.phase in (Phase.SERVING, Phase.FAILED)

    def load_progress(self) -> LoadProgress | None:
        """The slowest rank's weight loading, with rate and ETA."""
        return slowest(sh.progress(rank) for rank, st in sorted(self._ranks.items())
                       if (sh := st.shards) is not None and sh.total > 0)

    def rank_shards(self) -> dict[int, tuple[int, int]]:
        """Per rank that prints shard progress: (shards done, total)."""
        return {r: (st.shards.done, st.shards.total) for r, st in self._ranks.items()
                if st.shards is not None and st.shards.measure == SHARDS}

    def stage_seconds(self) -> dict[Phase, float]:
        """Seconds from the start of the watch to each phase reached, dated
        by the log line that reached it (the engine's stamp, else docker's),
        not by when it was read: a batch of lines read at once spans the
        time its lines were logged over (a graph capture of 27 s is not 0 s).
        A phase without such a line keeps the time it was learnt. Never
        before the watch began, nor before the phase reached before it."""
        out: dict[Phase, float] = {}
        floor = 0.0
        for ph, learnt in self.phase_times.items():  # in the order reached
            t = learnt
            if (logged := self._logged.get(ph)) is not None:
                st, when = logged
                read = st.read_time(when)
                if read is not None:
                    t = min(t, read)
            floor = out[ph] = max(t - self.start, floor)
        return out

    def summary(self) -> str:
        if self.failure is not None:
            return f"{self.lane}: failed on {self.failure.describe()}"
        text = f"{self.lane}: {self.phase}"
        if self.phase is Phase.LOADING and (lp := self.load_progress()):
            text += f", {lp.describe()}"
        if self.phase in (Phase.KV_ALLOC, Phase.GRAPH_CAPTURE, Phase.SERVING) and self.kv.tokens:
            text += f", KV pool {self.kv.tokens:,} tokens"
            if self.kv.concurrency is not None:
                text += f" ({self.kv.concurrency:.2f}x)"
        if self.phase is Phase.STALLED:
            text += f", last progress: {self.last_progress}"
        return text

    # ---- internals ---------------------------------------------------------
    def _rank(self, rank: int) -> _Rank:
        st = self._ranks.get(rank)
        if st is None:
            st = self._ranks[rank] = _Rank(recent=deque(maxlen=self.context_lines))
        return st

    def _apply(self, rank: int, st: _Rank, ev: LogEvent, ts: str | None, now: float,
               engine: float | None = None, body: str | None = None) -> None:
        """``body`` and ``ts``: the line that said it, whose log time dates a
        phase it reaches (``engine``: its engine stamp, when fatal)."""
        if self.phase is _FAILED:
            return
        kind = ev.kind
        fatal = ev.severity is _FATAL
        if kind is _TRACEBACK:
            st.traceback_line = st.lines
        elif kind is _EXCEPTION and st.traceback_line is not None:
            # The last line of a traceback is fatal while booting; once
            # serving, a logged request error is not the lane's death.
            if st.lines - st.traceback_line <= _TRACEBACK_WINDOW:
                fatal = self.phase is not _SERVING
            st.traceback_line = None
        if fatal:
            self.failure = Failure(rank, kind, ev.text, ts, tuple(st.recent),
                                   engine_time=engine)
            self._set_phase(_FAILED, now)
            self._date(_FAILED, st, engine if engine is not None else _log_time(body, ts))
            return
        if ev.severity is not _PROGRESS:
            return
        phase = ev.phase
        figure = memory_figure(kind, ev.fields)
        if figure is not None and (rank == 0 or figure[0] not in self.memory_gib):
            self.memory_gib[figure[0]] = figure[1]
        if kind is _SHARD or kind is _BYTES or kind is _TENSORS:
            self._shard(st, ev, ts, now)
        elif kind is _KV_CACHE or kind is _KV_CONCURRENCY or kind is _KV_MEMORY:
            st.kv_seen = True
            if kind is not _KV_MEMORY:
                self._kv(ev)
        elif kind is _GRAPH or kind is _GRAPH_DONE:
            if not st.kv_seen:
                # Model Runner V2 captures graphs once to measure them before this
                # rank's KV cache exists (gpu_worker.py:717): that pass is KV allocation.
                phase = Phase.KV_ALLOC
            elif kind is _GRAPH_DONE and self._advance(Phase.GRAPH_CAPTURE, now):
                # a worker's "finished" read before rank 0's bar: capture was reached
                self._date(Phase.GRAPH_CAPTURE, st, _log_time(body, ts))
        self._progress(ev.text, now)
        if phase is not None and phase is not self.phase and self._advance(phase, now):
            self._date(phase, st, _log_time(body, ts))

    def _shard(self, st: _Rank, ev: LogEvent, ts: str | None, now: float) -> None:
        """A shard bar's line, a byte bar's (its sizes in MiB) or a tensor bar's."""
        f = ev.fields
        if ev.kind is _BYTES:
            done, total, measure = parse_mib(f.get("done")), parse_mib(f.get("total")), READ
        else:
            done, total = parse_int(f.get("done")), parse_int(f.get("total"))
            measure = TENSORS if ev.kind is _TENSORS else SHARDS
        if done is None or total is None:
            return
        remaining = f.get("remaining")
        sh = st.shards
        if sh is None or sh.total != total or done < sh.done or sh.measure != measure:
            t = parse_timestamp(ts)
            st.shards = _Shards(now if t is None else t, done, done, total, ts, now, remaining,
                                measure)
        else:
            sh.done, sh.last_ts, sh.last_now, sh.tqdm_remaining = done, ts, now, remaining

    def _kv(self, ev: LogEvent) -> None:
        f = ev.fields
        tokens = parse_int(f.get("tokens")) or self.kv.tokens
        max_len = parse_int(f.get("max_len")) or self.kv.max_len
        conc = parse_float(f.get("concurrency"))
        if conc is None and "max_running" in f and tokens and max_len:
            conc = round(tokens / max_len, 2)
        self.kv = KvInfo(tokens, max_len, conc if conc is not None else self.kv.concurrency)

    def _progress(self, what: str, now: float) -> None:
        if now > self.last_progress_at:
            self.last_progress_at = now
        self.last_progress = what
        if self.phase is _STALLED and self._before_stall is not None:
            self._set_phase(self._before_stall, now)
            self._before_stall = None

    def _advance(self, phase: Phase, now: float) -> bool:
        """Phases only move forward during a boot. True when it moved."""
        to, at = _BOOT_INDEX.get(phase), _BOOT_INDEX.get(self.phase)
        if to is None or at is None or to <= at:
            return False
        self._set_phase(phase, now)
        return True

    def _set_phase(self, phase: Phase, now: float) -> None:
        self.phase = phase
        self.phase_times.setdefault(phase, now)

    def _date(self, phase: Phase, st: _Rank, logged: float | None) -> None:
        """The log time of the line that first reached ``phase``."""
        if logged is not None and phase not in self._logged:
            self._logged[phase] = (st, logged)


def _log_time(body: str | None, ts: str | None) -> float | None:
    """When a line was logged: the engine's own stamp, else docker's."""
    if body is None:
        return parse_timestamp(ts)
    engine = engine_time(body, ts)
    return engine if engine is not None else parse_timestamp(ts)


def _tqdm_seconds(text: str | None) -> float | None:
    """tqdm's ``MM:SS`` or ``H:MM:SS``; None for ``?`` or malformed."""
    if not text:
        return None
    m = _TQDM_TIME.match(text.strip())
    if m is None:
        return None
    h, mm, ss = m.groups()
    return int(h or 0) * 3600 + int(mm) * 60 + int(ss)
