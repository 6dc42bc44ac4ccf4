"""The endpoint of a lane's watch (watch/lane.py): the readiness stages
(port, health, the models of *this* lane's server, the first token) and,
once serving, the endpoint checks every ``endpoint_every_s`` (health, the
engine's ``/metrics``) that fail a lane whose server is gone.
They are the watcher's own parts: each takes the watcher and reads and
changes its state as its methods did."""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING

from sparktui.adapters.engine_http import EngineClient, HealthAnswer
from sparktui.core.canary import NO_ANSWER, REFUSED, decode_tokens, endpoint_gone
from sparktui.core.errors import RemoteError
from sparktui.core.logsig import (
    Kind,
    LogEvent,
    Phase,
    Severity,
)
from sparktui.watch.lane_fatal import catch_up
from sparktui.watch.lane_model import EndpointChecked, Verdict, rfc3339
from sparktui.watch.lane_reads import reader
from sparktui.watch.readiness import (
    STAGES,
    NodeLink,
    RankContainer,
    inspect_container,
    port_holders,
)

if TYPE_CHECKING:
    from sparktui.watch.lane import LaneWatcher

ENGINE_TIMEOUT_S = 3.0
RECHECK_S = 1.0
"""After an endpoint check whose ``/health`` said the server is gone (503,
refused), the next comes this soon: an exited engine is failed within
``endpoint_every_s`` + this of its death, not two whole check intervals."""
ECHO_READS = 3
"""Reads of the rank-0 log for the tag of a ``/v1/models`` request before the
start-time fallback and the port's owner are asked."""
START_SKEW_S = 2.0
"""Clock skew allowed between the server's start time and its container's."""


def api_reached(w: LaneWatcher) -> bool:
    times = w.tracker.phase_times
    return Phase.API_STARTING in times or Phase.SERVING in times


async def endpoint(w: LaneWatcher, port: int) -> None:
    while not api_reached(w):
        await w.clock.sleep(w.poll_s)
    rank0 = next(r for r in w.ranks if r.rank == 0)
    wanted = list(STAGES if w.first_token else STAGES[:-1])
    async with EngineClient(w.api_host, port, timeout=ENGINE_TIMEOUT_S) as client:
        model = ""
        while wanted:
            if w.tracker.failure is not None:
                return  # the log or the identity check said why
            stage = wanted[0]
            if stage == "port":
                passed = await client.port_open()
            elif stage == "health":
                passed = (await client.health()).ok
            elif stage == "models":
                model = await identity(w, client, rank0, port)
                if w.tracker.failure is not None:
                    return
                passed = bool(model)
            else:
                passed = await client.first_token(model) is not None
            if passed:
                now = w.clock.monotonic()
                w.stages[stage] = now - w.tracker.start
                w.tracker.note_progress(f"endpoint: {stage} passed", now)
                wanted.pop(0)
                continue
            if stage != "port" and not await client.port_open():
                wanted = list(STAGES if w.first_token else STAGES[:-1])
                w.stages.clear()
            await w.clock.sleep(w.poll_s)
        w.tracker.mark_serving(w.clock.monotonic())
        w._phase_changed()
        w._finish(Verdict.READY)
        while True:
            await w.clock.sleep(RECHECK_S if w._gone_checks else w.endpoint_every_s)
            await check(w, client)


async def identity(w: LaneWatcher, client: EngineClient, rank0: RankContainer, port: int) -> str:
    """The model this lane serves when the answering server proves to be
    this lane's; "" while it cannot tell yet. A server that is not this
    lane's fails the lane (through the tracker)."""
    link = w.links[rank0.node]
    facts = await inspect_container(link, rank0.container)
    if facts is None or not facts.running:
        return ""  # its exit reaches the tracker through the follower
    tag = secrets.token_hex(6)
    w._tags.add(tag)
    try:
        models = await client.models(tag)
        if not models:
            return ""
        mine = [m for m in models if m in facts.served_models] if facts.served_models \
            else models
        if not mine:
            await not_ours(w, link, port, f"/v1/models lists {', '.join(models)}, not "
                           f"{', '.join(facts.served_models)}")
            return ""
        if await echo(w, tag, rank0.rank):
            return mine[0]
        start = (await client.metrics()).get("process_start_time_seconds")
        if start is not None and facts.started is not None:
            if start >= facts.started - START_SKEW_S:
                return mine[0]
            await not_ours(w, link, port, "the server started before this lane's "
                           "container")
            return ""
        holders = await port_holders(link, port, w.lane)
        if holders:
            await not_ours(w, link, port, "")
        return ""
    finally:
        w._tags.discard(tag)


async def echo(w: LaneWatcher, tag: str, rank: int) -> bool:
    """Did the request tagged ``tag`` show up in the rank's log? The log
    is read to "now" (a one-shot read beside the live stream) a few times,
    so a slow stream cannot make the lane's own server look foreign."""
    st = w._ranks.get(rank)
    for _ in range(ECHO_READS):
        if tag in w._echoed:
            return True
        if st is not None and st.follower is not None and not st.busy:
            try:
                lines = await st.follower.catch_up(reader(w.links[st.rc.node]))
            except RemoteError:
                lines = []
            if lines:
                await w._ingest(st, lines)
        if tag in w._echoed:
            return True
        await w.clock.sleep(min(w.poll_s, 0.5))
    return False


async def not_ours(w: LaneWatcher, link: NodeLink, port: int, why: str) -> None:
    holders = await port_holders(link, port, w.lane)
    who = f"lane {', '.join(holders)}" if holders else "a server that is not this lane's"
    text = f"port {port} answered by {who}" + (f" ({why})" if why else "")
    ev = LogEvent(Kind.PORT_TAKEN, Severity.FATAL, Phase.FAILED, {"port": str(port)}, text)
    w.tracker.feed_event(0, ev, w.clock.monotonic(), rfc3339(w.clock.time()))
    w._after_feed()


async def check(w: LaneWatcher, client: EngineClient) -> None:
    """Health and decode rate of a serving lane (the console shows them);
    a server that is gone fails the lane (:func:`judge_endpoint`).
    ``/metrics`` is read when ``/health`` answered, and on an SGLang lane
    also when it gave no answer: SGLang's ``/health`` is a generation that a
    stuck scheduler never answers, nor one busy with a long prompt (0.5.23
    ``srt/entrypoints/http_server.py:721``), while its ``/metrics`` still
    does (the files the scheduler wrote, read by a MultiProcessCollector,
    ``srt/utils/common.py:2849``): its step counters tell the two apart
    (core/canary.judge_health) and, frozen, are the throughput-collapse
    evidence (core/canary.ThroughputWatch). vLLM serves both from one API
    server whose ``/health`` waits on nothing (0.33
    ``entrypoints/serve/instrumentator/health.py:22``): no answer there is no
    answer from ``/metrics`` either, and another bound spent on it would only
    delay the next check."""
    answer = await client.health()
    w.health = health_word(answer)
    metrics: dict[str, float] = {}
    sglang = any(r.engine == "sglang" for r in w.ranks)
    if answer.status is not None or (sglang and w.health == NO_ANSWER):
        metrics = await client.metrics()
        tokens = decode_tokens(metrics)
        now = w.clock.monotonic()
        if tokens is not None:
            if w._last_tokens is not None and now > w._last_tokens[0]:
                w.decode_tps = max(0.0, (tokens - w._last_tokens[1])
                                   / (now - w._last_tokens[0]))
            w._last_tokens = (now, tokens)
    w._emit(EndpointChecked(w.lane, w.health, w.decode_tps, metrics))
    await judge_endpoint(w)


async def judge_endpoint(w: LaneWatcher) -> None:
    """A serving lane whose ``/health`` says its server is gone
    (core/canary.endpoint_gone: 503, refused) has failed. What its ranks'
    logs and exits hold up to now comes first (read to their end): a
    fatal line or a rank's exit there is the failure, with its cause;
    only when they hold none is the endpoint's word the failure."""
    w._learn_stop()
    if w.tracker.failure is not None or w.stopping_since is not None \
            or w.tracker.phase is not Phase.SERVING:
        w._gone_checks = 0
        return
    gone = endpoint_gone(w.health, w._gone_checks, w.port)
    w._gone_checks = 0 if w.health in ("ok", NO_ANSWER) else w._gone_checks + 1
    if gone is None:
        return
    await asyncio.gather(*(catch_up(w, st) for st in w._ranks.values()
                           if st.follower is not None and not st.ended and not st.busy))
    w._learn_stop()
    if w.tracker.failure is None and w.stopping_since is None:
        ev = LogEvent(Kind.ENGINE_DEAD, Severity.FATAL, Phase.FAILED,
                      {"health": w.health}, gone)
        w.tracker.feed_event(0, ev, w.clock.monotonic(), rfc3339(w.clock.time()))
    w._after_feed()



def health_word(answer: HealthAnswer) -> str:
    """The lane's health column from one ``/health`` answer: ``ok``, the HTTP
    status, ``refused`` (nothing serves the port: refused or dropped) or
    ``no answer`` (it timed out: a hung server or a loaded host)."""
    if answer.status is None:
        return NO_ANSWER if "Timeout" in answer.error else REFUSED
    return "ok" if answer.ok else str(answer.status)


