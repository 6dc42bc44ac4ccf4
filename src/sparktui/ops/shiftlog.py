"""The journal as a markdown night log, in the style of the seeds' shift plans:
boots with their phases and durations and KV pool, failures with the first
fatal line, power cycles, stops, refusals, and what is still unfinished.

It tells what happened, not what was planned: a plug's off time is measured
between the journal's confirmations (off, then on again — possibly by a later
`resume`), an attempt that switched nothing is not called a power cycle, and
every failure and refusal is marked.

One clock per comparison (issue 25): an entry says which clock stamped it (a
demo's console the simulator's, a shell the wall's). A duration is taken
between two times on one clock only; across two (a demo's cycle turned back
on by a shell's resume) the log says so instead of a number, and when the
journal holds both, every time says its clock. Entries are ordered by the
journal's own order (appends under a lock), never by times on two clocks."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from sparktui.core.loadprogress import format_duration
from sparktui.core.logsig import BOOT_ORDER
from sparktui.core.qualify import describe_gate
from sparktui.ops.journal import SIMULATED, Entry, WorkflowRecord, clock_name, fold

PHASE_ORDER = tuple(p.value for p in BOOT_ORDER)


def _hm(t: float) -> str:
    return time.strftime("%H:%M", time.gmtime(t))


@dataclass(frozen=True)
class _Times:
    """How this log writes times: with their clock when it holds two."""

    mixed: bool

    def hm(self, t: float, clock: str) -> str:
        if not self.mixed:
            return _hm(t)
        return f"{_hm(t)} {'sim' if clock == SIMULATED else 'wall'}"

    def span(self, start: float, start_clock: str, end: float, end_clock: str) -> str | None:
        """``end - start`` as a duration, or None across two clocks."""
        return format_duration(end - start) if start_clock == end_clock else None


def _two_clocks(a: str, b: str) -> str:
    return f"not known: {clock_name(a)}'s time and {clock_name(b)}'s are not compared"


def _date(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(t))


def _window(n: int | None) -> str:
    if not n:
        return "?"
    return f"{n // 1024}K" if n % 1024 == 0 else f"{n:,}"


def _phases(phases: dict[str, float]) -> str:
    """``{"starting": 0, "loading weights": 4, "serving": 700}`` -> durations per phase.
    The times are the log's own (core/phases.py `stage_seconds` dates each
    phase by the line that reached it); a phase under a second is left out as
    noise ("graph capture 0s" says nothing an operator can use)."""
    known = sorted(((t, p) for p, t in phases.items() if p in PHASE_ORDER), key=lambda x: x[0])
    parts = []
    for (t, p), (t_next, _) in pairwise(known):
        if p not in ("starting", "serving") and t_next - t >= 1:
            parts.append(f"{p} {format_duration(t_next - t)}")
    return ", ".join(parts)


def _boot(w: WorkflowRecord, tm: _Times) -> str:
    d: dict[str, Any] = w.end_detail
    head = f"**{w.detail.get('recipe', w.target)} on {w.detail.get('cluster', '?')}**"
    if w.ended_at is None:
        span = f"({tm.hm(w.began_at, w.clock)} UTC, never ended)"
    else:
        took = tm.span(w.began_at, w.clock, w.ended_at, w.end_clock)
        span = (f"({tm.hm(w.began_at, w.clock)} → {tm.hm(w.ended_at, w.end_clock)} UTC, "
                f"{took or 'its duration ' + _two_clocks(w.clock, w.end_clock)})")
    if d.get("detached"):
        return f"- {head} {span}: ranks started, detached (boot followed by `sparktui wait`)."
    lines = []
    if w.ok:
        lines.append(f"- {head} {span}: **up**.")
    elif "failure" in d:
        f = d["failure"]
        lines.append(f"- {head} {span}: **FAILED** on rank {f['rank']}: `{f['line']}`.")
    elif "thrash" in d:
        t = d["thrash"]
        lines.append(f"- {head} {span}: **THRASH** on {', '.join(t.get('nodes') or [t['node']])} "
                     f"during the boot: {'; '.join(t.get('evidence', []))}.")
    elif "refused" in d:
        return ""
    else:
        lines.append(f"- {head} {span}: **not up** — {w.message}.")
    if phases := _phases(d.get("phases", {})):
        lines.append(f"  Phases: {phases}.")
    if d.get("kv_tokens"):
        conc = d.get("kv_concurrency")
        conc_text = f" ({conc:.2f}x)" if isinstance(conc, int | float) else ""
        lines.append(f"  KV pool **{d['kv_tokens']:,} tokens @{_window(d.get('kv_max_len'))}"
                     f"{conc_text}**.")
    if stages := d.get("stages"):
        lines.append("  Endpoint: " + ", ".join(f"{k} +{format_duration(v)}"
                                                for k, v in stages.items()) + ".")
    if predicted := d.get("oom_predictions"):
        lines.append(f"  Predicted OOM ({len(predicted)} rank(s)): {predicted[0]['message']}.")
    if gate := d.get("qualify"):
        verdict = describe_gate(gate)
        lines.append(f"  {verdict[:1].upper()}{verdict[1:]}.")
    if not w.ok and "failure" in d:
        lines.append("  " + ("Ranks kept (--keep)." if "kept" in w.message else
                             "Ranks stopped; last lines of every rank are in the journal."))
    return "\n".join(lines)


def _gate(w: WorkflowRecord, tm: _Times) -> str:
    """A quality gate run on a serving lane (``sparktui qualify``)."""
    gate = w.end_detail.get("qualify")
    return f"- {tm.hm(w.began_at, w.clock)} {w.target}: " \
           f"{describe_gate(gate) if gate else w.message}."


SWITCHING = {"plug off": False, "plug on": True, "switch off": False, "switch on": True}
"""Journal steps that switch a plug or a shared switch, and the state they confirm."""


@dataclass(frozen=True)
class _Switched:
    wf: str
    entity: str
    on: bool
    at: float
    """When the new state was confirmed (the step's outcome)."""
    clock: str
    """The clock ``at`` is on."""
    seq: int
    """Its place in the journal: the order of events on two clocks."""


def _switched(entries: Sequence[Entry], wfs: set[str]) -> list[_Switched]:
    """Every confirmed switching of the workflows `wfs`, in journal order,
    whichever workflow did it."""
    return [_Switched(e.wf, e.target, SWITCHING[e.step], e.t, e.clock, seq)
            for seq, e in enumerate(entries)
            if e.kind == "outcome" and e.ok and e.step in SWITCHING and e.wf in wfs]


def _seq(entries: Sequence[Entry], wf: str, step: str, target: str) -> int:
    """The journal place of `wf`'s last outcome of `step` on `target` (-1: none)."""
    return max((i for i, e in enumerate(entries) if e.kind == "outcome" and e.wf == wf
                and e.step == step and e.target == target), default=-1)


def _off_spell(events: list[_Switched], off: _Switched, tm: _Times) -> str:
    """How long the plug turned off by `off` actually stayed off (journal times)."""
    back = next((e for e in events if e.entity == off.entity and e.on and e.seq > off.seq),
                None)
    if back is None:
        return f"{off.entity} off since {tm.hm(off.at, off.clock)}, **still OFF**"
    by = "" if back.wf == off.wf else f" by {back.wf}"
    took = tm.span(off.at, off.clock, back.at, back.clock)
    if took is None:
        return (f"off at {tm.hm(off.at, off.clock)} → on at {tm.hm(back.at, back.clock)}{by}; "
                f"how long off is {_two_clocks(off.clock, back.clock)}")
    return f"off {took} → on at {tm.hm(back.at, back.clock)}{by}"


def _off_before(events: list[_Switched], on: _Switched, tm: _Times) -> str:
    """How long the plug turned on by `on` had been off (journal times), and by
    whose confirmation."""
    off = next((e for e in reversed(events) if e.entity == on.entity and not e.on
                and e.seq < on.seq), None)
    if off is None:
        return "no plug-off confirmed before it"
    by = "" if off.wf == on.wf else f" by {off.wf}"
    took = tm.span(off.at, off.clock, on.at, on.clock)
    if took is None:
        return (f"off since {tm.hm(off.at, off.clock)}{by}; how long is "
                f"{_two_clocks(off.clock, on.clock)}")
    return f"off {took} since {tm.hm(off.at, off.clock)}{by}"


def _resume(w: WorkflowRecord, mine: list[_Switched], events: list[_Switched],
            head: str, state: str, finished: str, tm: _Times) -> str:
    """A resume as it was: what each plug read, what it switched (with the off
    time the confirmations measure), how it ended."""
    reads = [f"{s.target} read {s.detail.get('state', '?')} at "
             f"{tm.hm(s.finished_at or s.started_at, w.clock)}"
             for s in w.steps if s.step == "plug read" and s.ok]
    switched = [f"{e.entity} {'on' if e.on else 'off'} at {tm.hm(e.at, e.clock)}"
                + (f" ({_off_before(events, e, tm)})" if e.on else "") for e in mine]
    said = "; ".join([*reads, *(["switched " + ", ".join(switched)] if switched
                                else ["nothing switched"])])
    return (f"{head} resume {w.detail.get('resumes', w.target)}: {state}{finished}; {said}: "
            f"{w.message}")


def _in_doubt(w: WorkflowRecord, records: Sequence[WorkflowRecord],
              events: list[_Switched], entries: Sequence[Entry], tm: _Times) -> list[str]:
    """Each plug-off call of `w` that was in flight when it stopped (no outcome),
    told by what its resume read: never off, or off until turned on again (at
    most since the call: the plug's own off time is not in the journal)."""
    out = []
    for s in w.steps:
        if s.step != "plug off" or s.ok is not None:
            continue
        read = next(((r, x) for r in records if r.detail.get("resumes") == w.wf
                     for x in r.steps if x.step == "plug read" and x.target == s.target
                     and x.ok), None)
        call = f"{s.target}: its plug-off call was in flight when it stopped"
        if read is None:
            out.append(f"{call}, and no plug read since")
            continue
        r, x = read
        state, at = x.detail.get("state", "?"), x.finished_at or x.started_at
        if state != "off":
            out.append(f"{call}; {r.wf} read it {state} at {tm.hm(at, r.clock)}: "
                       f"it was never off")
            continue
        read_seq = _seq(entries, r.wf, "plug read", s.target)
        on = next((e for e in events if e.entity == s.target and e.on and e.seq > read_seq),
                  None)
        if on is None:
            out.append(f"{call}; {r.wf} read it off at {tm.hm(at, r.clock)}, **still OFF**")
            continue
        took = tm.span(s.started_at, w.clock, on.at, on.clock)
        most = (f"off at most {took}" if took is not None
                else f"how long off is {_two_clocks(w.clock, on.clock)}")
        out.append(f"{call}; {r.wf} read it off at {tm.hm(at, r.clock)}, on at "
                   f"{tm.hm(on.at, on.clock)} by {on.wf} ({most}, from the call at "
                   f"{tm.hm(s.started_at, w.clock)})")
    return out


def _power(w: WorkflowRecord, events: list[_Switched], records: Sequence[WorkflowRecord],
           entries: Sequence[Entry], tm: _Times) -> str:
    """What a power workflow actually did: the plugs it switched, for how long a
    plug was really off, when it finished; an attempt that switched nothing
    says so (it is not a power cycle), one whose call was in flight says what
    its resume found."""
    mine = [e for e in events if e.wf == w.wf]
    state = "done" if w.ok else "**FAILED**"
    if w.ended_at is None:
        finished = ", never finished"
    else:
        took = tm.span(w.began_at, w.clock, w.ended_at, w.end_clock)
        finished = (f", finished {tm.hm(w.ended_at, w.end_clock)} "
                    f"({took or 'its duration ' + _two_clocks(w.clock, w.end_clock)})")
    head = f"- {tm.hm(w.began_at, w.clock)}"
    if w.workflow == "resume":
        return _resume(w, mine, events, head, state, finished, tm)
    if not mine:
        if doubts := _in_doubt(w, records, events, entries, tm):
            return (f"{head} {w.workflow} {w.target}: {state}{finished}; {'; '.join(doubts)}: "
                    f"{w.message}")
        return f"{head} {w.workflow} {w.target}: {state}, nothing switched{finished}: {w.message}"
    if w.workflow in ("power-cycle", "recover"):
        spells = "; ".join(_off_spell(events, e, tm) for e in mine if not e.on)
        what = (f"power-cycled {w.target}" if w.ok and w.workflow == "power-cycle"
                else f"{w.workflow} {w.target} {state}")
        return f"{head} {what} via HA ({spells}){finished}: {w.message}"
    switched = ", ".join(f"{e.entity} {'on' if e.on else 'off'} at {tm.hm(e.at, e.clock)}"
                         for e in mine)
    shared = {s for s in w.detail.get("switches") or []}
    if shared and (hit := [e.entity for e in mine if e.entity in shared]):
        switched += f" (shared switches switched: {', '.join(hit)})"
    return f"{head} {w.workflow} {w.target}: {state}{finished}; switched {switched}: {w.message}"


def _starts(entries: Sequence[Entry], since: float | None, ago: float | None,
            now: float | None, clock: str) -> dict[str, float]:
    """Where the window starts on each clock of `entries`: ``since`` is a UTC
    time, read on each clock as its own; ``ago`` seconds back from ``now`` on
    ``clock`` (the reader's), and on another clock back from its latest entry
    (its now is not known here)."""
    clocks = {e.clock for e in entries}
    if since is not None:
        return dict.fromkeys(clocks, since)
    if ago is None:
        return {}
    out = {}
    for c in clocks:
        end = now if c == clock and now is not None else max(e.t for e in entries
                                                             if e.clock == c)
        out[c] = end - ago
    return out


def render(entries: Sequence[Entry], *, since: float | None = None, ago: float | None = None,
           now: float | None = None, clock: str = "") -> str:
    """The night log of every workflow that began in the window: at or after
    the UTC time ``since`` (on each entry's own clock), or ``ago`` seconds
    back from ``now`` on ``clock`` (the reader's; on another clock, from its
    latest entry)."""
    entries = list(entries)
    starts = _starts(entries, since, ago, now, clock)

    def inside(t: float, c: str) -> bool:
        return c not in starts or t >= starts[c]

    records = [w for w in fold(entries) if inside(w.began_at, w.clock)]
    if not records:
        return "# Night log\n\nNothing happened in this window.\n"
    tm = _Times(mixed=len({e.clock for e in entries}) > 1)
    out = [f"# Night log — {_title(records, tm)}", ""]
    if tm.mixed:
        out += ["Two clocks in this journal: *sim* times are on the simulator's clock "
                "(simulated UTC), *wall* times on the wall clock (UTC); no duration is "
                "taken across the two.", ""]
    elif records[0].clock == SIMULATED:
        out += ["Times are on the simulator's clock (simulated UTC).", ""]
    if ago is not None and any(c != clock for c in starts):
        out += [f"The last {format_duration(ago)} of {clock_name(clock)}; on "
                + ", ".join(clock_name(c) for c in starts if c != clock)
                + ", whose now is not known here, up to its latest entry.", ""]
    boots = [b for b in (_boot(w, tm) if w.workflow == "serve" else _gate(w, tm)
                         for w in records if w.workflow in ("serve", "qualify") and w.finished)
             if b]
    events = _switched(entries, {w.wf for w in records})
    power = [_power(w, events, records, entries, tm) for w in records if w.finished and
             (w.workflow.startswith("power") or w.workflow in ("recover", "resume")
              or w.workflow.startswith("cluster-power"))
             and not w.end_detail.get("refused")]
    stops = [f"- {tm.hm(w.began_at, w.clock)} stop {w.target}: "
             f"{'done' if w.ok else 'FAILED'}: {w.message}"
             for w in records if w.workflow == "stop" and w.finished
             and not w.end_detail.get("refused")]
    refusals = [f"- {tm.hm(w.began_at, w.clock)} {w.workflow} {w.target} **REFUSED**:\n"
                + "\n".join(f"  - {v['message']}" for v in w.end_detail["refused"])
                for w in records if w.end_detail.get("refused")]
    overrides = [f"- {tm.hm(e.t, e.clock)} {e.workflow} {e.target}: override "
                 f"{', '.join(e.detail.get('overrides', []))}"
                 for e in entries if e.kind == "override" and inside(e.t, e.clock)]
    unfinished = [f"- {w.describe()}" for w in records if not w.finished]
    for title, items in (("Boots", boots), ("Power", power), ("Stops", stops),
                         ("Refusals (guards)", refusals), ("Overrides", overrides),
                         ("Unfinished — needs the operator", unfinished)):
        if items:
            out += [f"## {title}", "", *items, ""]
    return "\n".join(out)


def _title(records: Sequence[WorkflowRecord], tm: _Times) -> str:
    """The night's dates, per clock when there are two."""
    parts = []
    for c in dict.fromkeys(w.clock for w in records):
        mine = [w.began_at for w in records if w.clock == c]
        first, last = _date(mine[0]), _date(mine[-1])
        dates = first if first == last else f"{first} → {last}"
        parts.append(f"{dates} ({'sim' if c == SIMULATED else 'wall'})" if tm.mixed else dates)
    return ", ".join(parts)
