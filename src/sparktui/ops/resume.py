"""Unfinished workflows found in the journal at start, and what completes them.

A workflow that began and never ended was killed, crashed, or failed with an
obligation open (a plug left off). Each one is offered to the operator with
what would complete it; nothing is resumed without being asked. One whose
process is gone (the pid and its start time journaled with its ``begin``) is
said to be stale, with that pid and its age: nothing runs it any more.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sparktui.ops.context import OpsContext
from sparktui.ops.journal import Journal, WorkflowRecord, clock_name, clock_of
from sparktui.ops.runlocks import format_age, process_alive
from sparktui.ops.workflows.power_resume import offer_action, plugs_left_off


@dataclass(frozen=True)
class Offer:
    record: WorkflowRecord
    what: str
    """What happened, step by step."""
    action: str
    """What completing it does (empty when it can only be closed)."""
    plugs_off: tuple[str, ...] = ()


def owner_gone(record: WorkflowRecord) -> int | None:
    """The pid of a workflow's process when that process is gone (killed,
    crashed; a reused pid is not it); None while it runs, or no pid was journaled."""
    pid, started = record.detail.get("pid"), record.detail.get("pid_started")
    if not isinstance(pid, int):
        return None
    return None if process_alive(pid, started if isinstance(started, float) else None) else pid


def stale_note(record: WorkflowRecord, now: float, clock: str) -> str:
    """"stale: pid N is gone, began X ago" for an unfinished workflow whose
    process is gone (``now`` on ``clock``, as journal entries name it); a
    record begun on another clock says when on its own; "" otherwise."""
    pid = owner_gone(record)
    if pid is None:
        return ""
    began = (f"began {format_age(now - record.began_at)} ago" if record.clock == clock else
             f"began {time.strftime('%H:%M:%S', time.gmtime(record.began_at))} on "
             f"{clock_name(record.clock)}")
    return f"stale: its process (pid {pid}) is gone, {began}"


def offers(journal: Journal, ctx: OpsContext) -> list[Offer]:
    """One offer per unfinished workflow (oldest first)."""
    out = []
    now, clock = ctx.clock.time(), clock_of(ctx.clock)
    for rec in journal.unfinished():
        if rec.workflow == "resume":
            continue
        action = offer_action(rec, ctx.config, now, clock)
        plugs = tuple(e for _, e in plugs_left_off(rec, ctx.config))
        stale = stale_note(rec, now, clock)
        out.append(Offer(rec, rec.describe() + (f" ({stale})" if stale else ""), action, plugs))
    return out


def close(ctx: OpsContext, record: WorkflowRecord, reason: str) -> list[str]:
    """Mark an unfinished workflow ended (the operator's decision) and remove the
    locks it still holds; returns the nodes unlocked."""
    freed = [lock.node for lock in ctx.locks.list() if lock.wf == record.wf]
    for node in freed:
        ctx.locks.close(node)
    ctx.journal.append(record.wf, "end", workflow=record.workflow, target=record.target,
                       ok=False, message=f"closed by the operator: {reason}")
    return freed
