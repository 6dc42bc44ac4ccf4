"""The journal as a markdown night log, in the style of the seeds' shift plans:
boots with their phases and durations and KV pool, failures with the first
fatal line, power cycles, stops, refusals, and what is still unfinished.

It tells what happened, not what was planned: a plug's off time is measured
between the journal's confirmations (off, then on again — possibly by a later
`resume`), an attempt that switched nothing is not called a power cycle, and
every failure and refusal is marked."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from sparktui.core.logsig import BOOT_ORDER
from sparktui.core.phases import format_duration
from sparktui.core.qualify import describe_gate
from sparktui.ops.journal import Entry, WorkflowRecord, fold

PHASE_ORDER = tuple(p.value for p in BOOT_ORDER)


def _hm(t: float) -> str:
    return time.strftime("%H:%M", time.gmtime(t))


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


def _boot(w: WorkflowRecord) -> str:
    d: dict[str, Any] = w.end_detail
    head = f"**{w.detail.get('recipe', w.target)} on {w.detail.get('cluster', '?')}**"
    span = f"({_hm(w.began_at)} → {_hm(w.ended_at)} UTC" if w.ended_at else \
        f"({_hm(w.began_at)} UTC"
    if w.ended_at:
        span += f", {format_duration(w.ended_at - w.began_at)})"
    else:
        span += ", never ended)"
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


def _gate(w: WorkflowRecord) -> str:
    """A quality gate run on a serving lane (``sparktui qualify``)."""
    gate = w.end_detail.get("qualify")
    return f"- {_hm(w.began_at)} {w.target}: {describe_gate(gate) if gate else w.message}."


SWITCHING = {"plug off": False, "plug on": True, "switch off": False, "switch on": True}
"""Journal steps that switch a plug or a shared switch, and the state they confirm."""


@dataclass(frozen=True)
class _Switched:
    wf: str
    entity: str
    on: bool
    at: float
    """When the new state was confirmed (the step's outcome)."""


def _switched(records: Sequence[WorkflowRecord]) -> list[_Switched]:
    """Every confirmed switching, in time order, whichever workflow did it."""
    out = [_Switched(w.wf, s.target, SWITCHING[s.step], s.finished_at or s.started_at)
           for w in records for s in w.steps if s.ok and s.step in SWITCHING]
    return sorted(out, key=lambda x: x.at)


def _off_spell(events: list[_Switched], off: _Switched) -> str:
    """How long the plug turned off by `off` actually stayed off (journal times)."""
    back = next((e for e in events if e.entity == off.entity and e.on and e.at >= off.at), None)
    if back is None:
        return f"{off.entity} off since {_hm(off.at)}, **still OFF**"
    by = "" if back.wf == off.wf else f" by {back.wf}"
    return f"off {format_duration(back.at - off.at)} → on at {_hm(back.at)}{by}"


def _off_before(events: list[_Switched], on: _Switched) -> str:
    """How long the plug turned on by `on` had been off (journal times), and by
    whose confirmation."""
    off = next((e for e in reversed(events) if e.entity == on.entity and not e.on
                and e.at <= on.at), None)
    if off is None:
        return "no plug-off confirmed before it"
    by = "" if off.wf == on.wf else f" by {off.wf}"
    return f"off {format_duration(on.at - off.at)} since {_hm(off.at)}{by}"


def _resume(w: WorkflowRecord, mine: list[_Switched], events: list[_Switched],
            head: str, state: str, finished: str) -> str:
    """A resume as it was: what each plug read, what it switched (with the off
    time the confirmations measure), how it ended."""
    reads = [f"{s.target} read {s.detail.get('state', '?')} at "
             f"{_hm(s.finished_at or s.started_at)}"
             for s in w.steps if s.step == "plug read" and s.ok]
    switched = [f"{e.entity} {'on' if e.on else 'off'} at {_hm(e.at)}"
                + (f" ({_off_before(events, e)})" if e.on else "") for e in mine]
    said = "; ".join([*reads, *(["switched " + ", ".join(switched)] if switched
                                else ["nothing switched"])])
    return (f"{head} resume {w.detail.get('resumes', w.target)}: {state}{finished}; {said}: "
            f"{w.message}")


def _in_doubt(w: WorkflowRecord, records: Sequence[WorkflowRecord],
              events: list[_Switched]) -> list[str]:
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
            out.append(f"{call}; {r.wf} read it {state} at {_hm(at)}: it was never off")
            continue
        on = next((e for e in events if e.entity == s.target and e.on and e.at >= at), None)
        out.append(f"{call}; {r.wf} read it off at {_hm(at)}, "
                   + (f"on at {_hm(on.at)} by {on.wf} (off at most "
                      f"{format_duration(on.at - s.started_at)}, from the call at "
                      f"{_hm(s.started_at)})" if on else "**still OFF**"))
    return out


def _power(w: WorkflowRecord, events: list[_Switched],
           records: Sequence[WorkflowRecord] = ()) -> str:
    """What a power workflow actually did: the plugs it switched, for how long a
    plug was really off, when it finished; an attempt that switched nothing
    says so (it is not a power cycle), one whose call was in flight says what
    its resume found."""
    mine = [e for e in events if e.wf == w.wf]
    state = "done" if w.ok else "**FAILED**"
    finished = (f", finished {_hm(w.ended_at)} ({format_duration(w.ended_at - w.began_at)})"
                if w.ended_at else ", never finished")
    head = f"- {_hm(w.began_at)}"
    if w.workflow == "resume":
        return _resume(w, mine, events, head, state, finished)
    if not mine:
        if doubts := _in_doubt(w, records, events):
            return (f"{head} {w.workflow} {w.target}: {state}{finished}; {'; '.join(doubts)}: "
                    f"{w.message}")
        return f"{head} {w.workflow} {w.target}: {state}, nothing switched{finished}: {w.message}"
    if w.workflow in ("power-cycle", "recover"):
        spells = "; ".join(_off_spell(events, e) for e in mine if not e.on)
        what = (f"power-cycled {w.target}" if w.ok and w.workflow == "power-cycle"
                else f"{w.workflow} {w.target} {state}")
        return f"{head} {what} via HA ({spells}){finished}: {w.message}"
    switched = ", ".join(f"{e.entity} {'on' if e.on else 'off'} at {_hm(e.at)}" for e in mine)
    shared = {s for s in w.detail.get("switches") or []}
    if shared and (hit := [e.entity for e in mine if e.entity in shared]):
        switched += f" (shared switches switched: {', '.join(hit)})"
    return f"{head} {w.workflow} {w.target}: {state}{finished}; switched {switched}: {w.message}"


def render(entries: Sequence[Entry], *, since: float | None = None) -> str:
    """The night log of every workflow that began at or after ``since``."""
    records = [w for w in fold(list(entries)) if since is None or w.began_at >= since]
    if not records:
        return "# Night log\n\nNothing happened in this window.\n"
    first, last = records[0].began_at, records[-1].began_at
    title = _date(first) if _date(first) == _date(last) else f"{_date(first)} → {_date(last)}"
    out = [f"# Night log — {title}", ""]
    boots = [b for b in (_boot(w) if w.workflow == "serve" else _gate(w) for w in records
                         if w.workflow in ("serve", "qualify") and w.finished) if b]
    events = _switched(records)
    power = [_power(w, events, records) for w in records if w.finished and
             (w.workflow.startswith("power") or w.workflow in ("recover", "resume")
              or w.workflow.startswith("cluster-power"))
             and not w.end_detail.get("refused")]
    stops = [f"- {_hm(w.began_at)} stop {w.target}: {'done' if w.ok else 'FAILED'}: {w.message}"
             for w in records if w.workflow == "stop" and w.finished
             and not w.end_detail.get("refused")]
    refusals = [f"- {_hm(w.began_at)} {w.workflow} {w.target} **REFUSED**:\n"
                + "\n".join(f"  - {v['message']}" for v in w.end_detail["refused"])
                for w in records if w.end_detail.get("refused")]
    overrides = [f"- {_hm(e.t)} {e.workflow} {e.target}: override "
                 f"{', '.join(e.detail.get('overrides', []))}"
                 for e in entries if e.kind == "override" and (since is None or e.t >= since)]
    unfinished = [f"- {w.describe()}" for w in records if not w.finished]
    for title, items in (("Boots", boots), ("Power", power), ("Stops", stops),
                         ("Refusals (guards)", refusals), ("Overrides", overrides),
                         ("Unfinished — needs the operator", unfinished)):
        if items:
            out += [f"## {title}", "", *items, ""]
    return "\n".join(out)
