"""The serving canary's rules (pure): is a lane that answers ``/health``
really serving, and has its engine stopped making tokens?

An engine core that *exited* turns vLLM's ``/health`` to 503 and its API
server exits within ~5 s (vLLM 0.33 ``v1/engine/core_client.py``): the lane
has failed (:func:`endpoint_gone`, judged by the lane watcher, which fails
the lane with the cause its ranks' logs and exits give). A *hung* core keeps
``/health`` 200 (vllm-project/vllm#39863, #7633), so ``/health`` alone says
nothing about generation. Two signals do:

- the canary: one tiny completion (1 token, temperature 0, bounded timeout)
  every few tens of seconds. It failing while ``/health`` answers and the
  engine's token counters stand still is ``unresponsive``; it failing while
  the counters move is a busy engine (a sim engine serves one request at a
  time; a real one behind a huge prefill can be slow), not a dead one.
- the engine's own ``/metrics``: requests running while no token (prompt or
  generation) is processed for :data:`COLLAPSE_AFTER_S` is a throughput
  collapse. "Processed" is read from the counters each engine step moves
  (:func:`step_tokens`): SGLang's ``prompt_tokens_total`` and
  ``generation_tokens_total`` move only when a request finishes, so a
  healthy request decoding for minutes would look flat on them. On GB10
  throughput drops to zero a few seconds before a host wedges
  (NVIDIA/open-gpu-kernel-modules#1358): thrash evidence for the lane's
  nodes that comes before a starved SSH does. Its window is on the
  engine host's clock (the ``Date`` of the ``/metrics`` answer), the clock the
  counters move on, not the watcher's (a sentinel on wall time beside a 60x
  simulator would otherwise wait 20 simulated minutes).

A hung *idle* core shows no queue: vLLM records ``num_requests_running`` /
``_waiting`` (and the token counters) only from the core's step outputs, in
the API server's output handler (0.33 ``v1/engine/async_llm.py:930``,
``v1/metrics/loggers.py:1147``; 0.11 ``async_llm.py:474``, ``loggers.py:531``;
the core's own count publishing runs only with DP load balancing,
``v1/engine/core.py:1634``), so the gauges of a core that hung idle stay at
0/0 and the canary's stuck request is never counted. What tells is that the
API server *took* the request (its answer's headers came with 200) and the
core then made no step at all (docs/DIALECTS.md, "A hung core").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sparktui.core.loadprogress import format_duration

COLLAPSE_AFTER_S = 20.0
"""Requests running with no token processed for this long is a collapse. A
chunked-prefill step (8192 tokens) takes ~9 s at the slowest lane's ~900
prompt tokens/s, so a healthy engine always moves within it."""
DEFAULT_INTERVAL_S = 60.0
"""``[console] canary_interval_s`` default."""

_VLLM_TOKENS = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")
"""vLLM counts both from every step's outputs as they come (0.33
``v1/metrics/loggers.py:1262``; 0.11 ``loggers.py:562``): a long request moves them."""
SGLANG_STEP_TOKENS = "sglang:realtime_tokens_total"
"""SGLang 0.5.23's counters of what the engine did. ``prompt_tokens_total`` and
``generation_tokens_total`` are the tokenizer's, counted once a request
*finishes* (``observability/metrics_collector.py:2109``, called from
``managers/tokenizer_manager.py:3287`` under ``if state.finished``): a
request decoding for minutes leaves them flat. The scheduler counts this one
at every prefill batch (mode ``prefill_compute``/``prefill_cache``,
``scheduler_components/metrics_reporter.py:810``) and every decode step (mode
``decode``, ``:912``, the per-iteration work before the ``decode_log_interval``
gate at ``:934``), into ``metrics_collector.py:1572``. Its series appear with
their first token (a labelled counter has no sample before)."""
_RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs")
_WAITING = ("vllm:num_requests_waiting", "sglang:num_queue_reqs")


@dataclass(frozen=True)
class EngineCounters:
    """What one ``/metrics`` answer says about the engine's work."""

    at: float
    """Monotonic seconds on the watcher's clock."""
    tokens: float | None
    """Prompt + generation tokens processed since the engine started, as its
    steps make them (:func:`step_tokens`); None when the engine exports no
    such counter."""
    running: int | None
    waiting: int | None
    engine_at: float | None = None
    """The engine host's clock when it answered (epoch seconds, the answer's
    ``Date``); None when the answer carried none."""

    @property
    def queue(self) -> tuple[int | None, int | None]:
        return self.running, self.waiting


def step_tokens(metrics: Mapping[str, float]) -> float | None:
    """Prompt + generation tokens the engine has processed, counted as its
    steps make them (vLLM's token counters, SGLang's
    :data:`SGLANG_STEP_TOKENS`), from ``parse_metrics`` output; None when the
    answer carries no such counter."""
    if SGLANG_STEP_TOKENS in metrics:
        return metrics[SGLANG_STEP_TOKENS]
    tokens = [metrics[k] for k in _VLLM_TOKENS if k in metrics]
    return sum(tokens) if tokens else None


def decode_tokens(metrics: Mapping[str, float]) -> float | None:
    """Generated tokens so far, counted step by step (the lane's decode rate):
    vLLM's ``generation_tokens_total``, SGLang's :data:`SGLANG_STEP_TOKENS` of
    mode ``decode`` (not its ``generation_tokens_total``, counted at finish)."""
    sglang = metrics.get(f'{SGLANG_STEP_TOKENS}{{mode="decode"}}')
    return sglang if sglang is not None else metrics.get("vllm:generation_tokens_total")


def counters_from_metrics(at: float, metrics: Mapping[str, float],
                          engine_at: float | None = None) -> EngineCounters:
    """vLLM or SGLang metric names (``parse_metrics`` output) -> counters;
    ``engine_at``: the engine's clock when it answered, if known."""
    tokens = step_tokens(metrics)
    running = next((metrics[k] for k in _RUNNING if k in metrics), None)
    waiting = next((metrics[k] for k in _WAITING if k in metrics), None)
    return EngineCounters(at, tokens,
                          None if running is None else int(running),
                          None if waiting is None else int(waiting), engine_at)


@dataclass(frozen=True)
class Collapse:
    """Requests running and no token processed since ``since``."""

    since: float
    """On the engine's clock (epoch seconds) when its answers carry one, else
    the watcher's monotonic seconds."""
    seconds: float
    running: int

    def describe(self) -> str:
        return (f"engine /metrics: no token processed for {self.seconds:.0f} s with "
                f"{self.running} request(s) running (throughput collapsed to 0)")


class ThroughputWatch:
    """Fed every ``/metrics`` sample of one lane; says when throughput collapsed."""

    def __init__(self, after_s: float = COLLAPSE_AFTER_S) -> None:
        self.after_s = after_s
        self._tokens: float | None = None
        self._flat_since: tuple[bool, float] | None = None
        """(on the engine's clock, time) of the first flat sample."""
        self.last: EngineCounters | None = None
        self.moved = False
        """The last sample's tokens grew on the one before."""

    def observe(self, c: EngineCounters) -> Collapse | None:
        """The window is measured on the engine's clock (``engine_at``) when the
        answers carry it; a sample on the other clock, or an engine clock that
        stepped back, starts it again (nothing is compared across clocks).
        :attr:`moved` says whether this sample's tokens grew on the last."""
        previous, self.last = self._tokens, c
        self.moved = previous is not None and c.tokens is not None and c.tokens > previous
        if c.tokens is None or c.running is None:
            self._tokens = self._flat_since = None
            return None
        self._tokens = c.tokens
        mark = (c.engine_at is not None, c.engine_at if c.engine_at is not None else c.at)
        if c.running <= 0 or previous is None or c.tokens > previous:
            self._flat_since = None if c.running <= 0 else mark
            return None
        if self._flat_since is None or self._flat_since[0] != mark[0] \
                or mark[1] < self._flat_since[1]:
            self._flat_since = mark
        since = self._flat_since[1]
        flat = mark[1] - since
        return Collapse(since, flat, c.running) if flat >= self.after_s else None


@dataclass(frozen=True)
class CanaryAnswer:
    """One canary round: the lane's last health answer, the engine's counters
    before and after the tiny completion, and the completion itself."""

    health: str
    """``ok``, an HTTP status, ``refused`` (engine_http's wording)."""
    ok: bool
    """The completion came back with a token within its timeout."""
    latency_s: float | None = None
    error: str = ""
    """Why the completion failed (``no answer in 10 s``, ``HTTP 500: ...``)."""
    before: EngineCounters | None = None
    after: EngineCounters | None = None
    sent_at: float | None = None
    """When the completion was sent (the watcher's monotonic clock)."""
    accepted_at: float | None = None
    """When its answer began, status 200 and headers (the API server took the
    request); None when it did not within the bound."""
    lag_s: float | None = None
    """How late, at worst, the round's own timers (its bound, its settling)
    fired: this console's event loop lag; None when not measured."""


FAILED_ROUNDS = 2
"""Consecutive failed rounds, each with its own evidence, before a lane is
called ``unresponsive``: one slow round on a loaded 2-core host (the
completion waits on a CPU, not on a dead engine) is no alarm."""

STEP_SEEN_S = 3.0
"""A healthy engine core that was handed a request shows a step in its
``/metrics`` this soon: it takes the request from its input queue when idle
and steps at once (0.33 ``v1/engine/core.py:1647``, ``:667``); the step's
output moves the token counters or the queue gauges (the canary's prompt is
a few dozen tokens: one prefill step, well under a second on GB10). The
``/metrics`` read that shows none must come at least this long after the
answer's headers."""
LOOP_LAG_MAX_S = 1.0
"""A round is evidence of a hung idle core only when this console's own loop
fired the round's timers (its bound, its settling) within this late. A
starved loop fires timers late, never early, so its bound and its reads only
give the engine more time; but
it also stamps an answer late (a ``/metrics`` read answered before the engine
stepped, stamped seconds later, would look fresh) and may not have read a
token that did come. Within this lag, :data:`STEP_SEEN_S` still leaves the
engine two seconds to step."""


@dataclass(frozen=True)
class CanaryVerdict:
    state: str
    """``serving``, ``busy`` (slow, but the engine makes tokens), ``slow`` (a
    failed round without evidence of a dead engine: nothing queued, or no
    ``/metrics`` to tell, or the first failed round) or ``unresponsive``."""
    evidence: tuple[str, ...] = ()

    @property
    def unresponsive(self) -> bool:
        return self.state == "unresponsive"

    dead_evidence: bool = False
    """The round failed with evidence of a dead engine (counts towards
    :data:`FAILED_ROUNDS`)."""


def judge_canary(answer: CanaryAnswer, failed_before: int) -> CanaryVerdict | None:
    """The lane's serving state from one canary round, given how many rounds
    before it in a row failed with evidence (``failed_before``). None when
    ``/health`` itself does not answer 200 (the lane's health column says
    that).

    A round is evidence of a dead engine when the engine answered with an
    error rather than timing out (an HTTP error: vLLM's EngineDeadError is a
    500; a connection the server dropped; an answer with no token), or when its
    ``/metrics`` show requests running or waiting and no token processed
    while the completion waited, or -- nothing queued -- when the API server
    took the request (its headers came) and ``/metrics`` show no step at all
    (tokens and queue unchanged) a while after it (:data:`STEP_SEEN_S`) while
    this console's loop kept time (:data:`LOOP_LAG_MAX_S`): a core that hung
    idle. A timeout with nothing queued and no headers (the request may never
    have reached the engine: a loaded host, a clock that ran ahead) or no
    counters at all is ``slow``, never ``unresponsive``."""
    if answer.health != "ok":
        return None
    if answer.ok:
        lat = f" in {answer.latency_s:.2f} s" if answer.latency_s is not None else ""
        return CanaryVerdict("serving", (f"1-token completion answered{lat}",))
    failed = f"/health answers 200 but a 1-token completion failed: {answer.error}"
    again = failed_before + 1 >= FAILED_ROUNDS
    rounds = f"{failed_before + 1} rounds in a row"
    b, a = answer.before, answer.after
    if not _timed_out(answer.error):
        return CanaryVerdict("unresponsive" if again else "slow", (failed, rounds), True)
    if b is None or a is None or b.tokens is None or a.tokens is None or a.at <= b.at:
        return CanaryVerdict("slow", (failed, "no /metrics to tell a dead engine from a "
                                      "slow one"))
    if a.tokens > b.tokens:
        return CanaryVerdict("busy", (failed, f"the engine processed {a.tokens - b.tokens:.0f}"
                                      " tokens meanwhile: busy, not dead"))
    queued = (a.running or 0) + (a.waiting or 0)
    queue = f"{a.running or 0} running, {a.waiting or 0} waiting"
    if queued > 0:
        return CanaryVerdict("unresponsive" if again else "slow",
                             (failed, f"no token processed in {a.at - b.at:.0f} s "
                              f"({queue}, /metrics)", rounds), True)
    hung = _hung_idle(answer, b, a, queue)
    if hung is None:
        return CanaryVerdict("unresponsive" if again else "slow",
                             (failed, _accepted_text(answer, a, queue), rounds), True)
    return CanaryVerdict("slow", (failed, hung))


def _hung_idle(answer: CanaryAnswer, b: EngineCounters, a: EngineCounters,
               queue: str) -> str | None:
    """Nothing queued at the engine: None when the round is evidence of a core
    that hung idle (the API server took the request, then ``/metrics`` shows no
    step at all), else why it is not."""
    if answer.accepted_at is None:
        return (f"no answer began (no response headers) and nothing queued at the engine "
                f"({queue}, /metrics): the request may not have reached it")
    if answer.lag_s is None or answer.lag_s > LOOP_LAG_MAX_S:
        late = "not measured" if answer.lag_s is None else f"up to {answer.lag_s:.1f} s late"
        return (f"accepted, nothing queued ({queue}, /metrics), but this console's own "
                f"timers ran {late} meanwhile: no evidence")
    if a.at - answer.accepted_at < STEP_SEEN_S:
        return (f"accepted, nothing queued ({queue}, /metrics), but no /metrics read "
                f"{STEP_SEEN_S:g} s after it to tell")
    if a.queue != b.queue or a.tokens != b.tokens:
        return f"the engine's /metrics changed meanwhile (now {queue}): it steps"
    return None


def _accepted_text(answer: CanaryAnswer, a: EngineCounters, queue: str) -> str:
    assert answer.accepted_at is not None
    took = f" {answer.accepted_at - answer.sent_at:.2f} s into the round" \
        if answer.sent_at is not None else ""
    return (f"the API server took it (headers 200{took}), then no token processed and no "
            f"engine step in {a.at - answer.accepted_at:.0f} s ({queue}, /metrics "
            "unchanged): the engine core does not step")


BAD_HEALTH_CHECKS = 2
"""Endpoint checks in a row whose ``/health`` says the API server is gone
before a serving lane is called ``failed`` (5 s apart: within 10 s). One
check lost to a loaded host is no alarm."""

NO_ANSWER = "no answer"
"""The lane's health when ``/health`` timed out: the port accepts, nothing
answers (a hung server, a loaded host, a node gone dark) -- no evidence of
an exit."""
REFUSED = "refused"
"""The lane's health when the connection was refused or dropped: nothing
serves the port any more."""

HUNG_HEALTH_CHECKS = 3
"""Endpoint checks in a row with no answer to ``/health`` before a serving
lane is called ``unresponsive`` (~15 s: a 3 s timeout on an idle server
three times running is no loaded host's doing)."""


def endpoint_gone(health: str, bad_before: int, port: int | None) -> str | None:
    """Why a serving lane has *failed*, from one endpoint check given how many
    before it in a row said the same, or None. vLLM answers ``/health`` 503
    once its engine core is dead (EngineDeadError; ``v1/engine/core_client.py``,
    ``entrypoints/serve/instrumentator/health.py``) and its API server exits
    ~5 s later (the port then refuses): both say the engine is gone for good.
    A ``/health`` that times out says nothing of the kind (:func:`judge_health`)."""
    if health in ("ok", NO_ANSWER) or bad_before + 1 < BAD_HEALTH_CHECKS:
        return None
    where = f"port {port}" if port else "the lane's port"
    said = (f"/health answers HTTP {health}" if health.isdigit()
            else f"{where} refuses connections (the API server is gone)")
    return f"{said} on {bad_before + 1} checks in a row"


def judge_health(health: str, hung_before: int, port: int | None,
                 moved: bool = False) -> CanaryVerdict | None:
    """The lane's state from one endpoint check while it serves, given how
    many checks before it in a row got no answer to ``/health`` with the
    engine's step counters standing still: the port accepts and nothing
    answers (a hung API server, a stuck scheduler) is ``unresponsive``; a
    server that is gone is :func:`endpoint_gone`'s (``failed``). None:
    nothing to say.

    ``moved``: the engine's step counters (:func:`step_tokens`) moved since
    the check before. Then no answer is a busy engine: SGLang's ``/health``
    is a generation that waits for any output of the scheduler (0.5.23
    ``srt/entrypoints/http_server.py:721``, ``:781``), which runs prefill
    first (``managers/scheduler.py:3993``) and admits nothing beside a chunk
    that takes the whole budget (``managers/schedule_policy.py:890``), and a
    chunk that is not the prompt's last streams nothing
    (``scheduler_components/batch_result_processor.py:432``): behind a long
    prompt it gives no answer for as long as its chunks take, while each
    chunk moves ``realtime_tokens_total`` (tests/fixtures/dialects/long_request.py)."""
    if health != NO_ANSWER:
        return None
    where = f"port {port}" if port else "the lane's port"
    if moved:
        return CanaryVerdict("busy", (f"{where} gives no answer to /health, but the engine "
                                      "processed tokens since the last check (/metrics): "
                                      "busy, not dead",))
    if hung_before + 1 < HUNG_HEALTH_CHECKS:
        return None
    return CanaryVerdict("unresponsive", (f"{where} gives no answer to /health on "
                                          f"{hung_before + 1} checks in a row",), True)


ROUND_OVERHEAD_S = 1.0
"""What a round costs beside its completion's bound: listing the engine's
models and reading its counters (milliseconds; a second on a loaded host)."""


def hang_budget(timeout_s: float, settle_s: float, retry_s: float) -> float:
    """Seconds from the start of the round that first meets a hang to the
    ``unresponsive`` verdict: :data:`FAILED_ROUNDS` bounded rounds, each
    judged ``settle_s`` after it ended, ``retry_s`` apart."""
    return FAILED_ROUNDS * (timeout_s + settle_s + ROUND_OVERHEAD_S) \
        + (FAILED_ROUNDS - 1) * retry_s


def round_period(interval_s: float, timeout_s: float, settle_s: float, retry_s: float) -> float:
    """Seconds between two canary rounds so that a hang is called within
    ``interval_s`` of its start: the round that finds it starts at most one
    period after the hang, and :func:`hang_budget` later it is called. Never
    under half the interval (a short interval then bounds the verdict by
    period + budget instead)."""
    return max(interval_s - hang_budget(timeout_s, settle_s, retry_s), interval_s / 2)


_TIMEOUT_WORDS = ("no answer in", "no complete answer in", "Timeout")
"""How a completion that waited out its bound reads (watch/canary's bound,
engine_http's stream bound, httpx's ``ReadTimeout``/``ConnectTimeout``)."""


def _timed_out(error: str) -> bool:
    return any(w in error for w in _TIMEOUT_WORDS)


def stale_age(last_good: float | None, now: float, interval_s: float) -> float | None:
    """Age of a node's or lane's last good sample when older than two
    intervals (monitoring that hides staleness misleads: glances#564)."""
    if last_good is None:
        return None
    age = now - last_good
    return age if age > 2 * interval_s else None


def describe_age(age_s: float) -> str:
    """``last good sample 7s ago`` / ``4m12s ago`` / ``2h05m ago``."""
    return f"last good sample {format_duration(age_s)} ago"
