"""The quality gate as workflow steps: the `Qualify` workflow (``sparktui
qualify LANE``, the console's qualify action: one plan, through
``prepare``/``execute`` like every workflow) runs it on a serving lane, and
``serve`` runs it right after readiness (``--no-qualify`` opts out). Each
request to the lane is a step, journaled before and after
(``intent``/``outcome``) with its evidence; the verdict and the smoke-bench
figures end the workflow (``detail["qualify"]``), where the shift log and the
console find them.

The gate only reads from the lane: a garbled lane is reported (alert, journal,
exit 1), never stopped here. The operator decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sparktui.adapters.engine_http import ChatAnswer, EngineClient
from sparktui.core.clock import Clock
from sparktui.core.config import Config
from sparktui.core.envelope import DEFAULT_RUNGS
from sparktui.core.errors import InputError
from sparktui.core.oom_predict import OomPredicted
from sparktui.core.qualify import (
    BENCH_MAX_TOKENS,
    Bench,
    BenchClock,
    CopyCheck,
    GateResult,
    GateState,
    IdentifierCheck,
    bench_from,
    bench_prompt,
    check_copy,
    check_identifiers,
    copy_prompt,
    engine_timing,
    exports_timers,
    identifier_prompt,
    identifiers,
    judge,
)
from sparktui.core.qualify_text import PASSAGES
from sparktui.core.recipe import QualifySpec
from sparktui.core.recipe_load import load_recipe
from sparktui.ops.context import OpsContext
from sparktui.ops.events import StepProgressed, WorkflowEvent, WorkflowFinished
from sparktui.ops.guards import Override, Verdict, evaluate, prompt_length
from sparktui.ops.lanes import discover_lanes
from sparktui.ops.plan import Needs, OpsState, Plan
from sparktui.ops.workflows.runner import PlannedStep, StepFailed, WorkflowRun
from sparktui.watch.readiness import RankContainer

COPY_TIMEOUT_S = 300.0
"""~600 tokens at 19 tokens/s (the slowest shipped lane) plus a reasoning block."""
IDS_TIMEOUT_S = 120.0
BENCH_TIMEOUT_S = 300.0
MODELS_TIMEOUT_S = 10.0
BENCH_ATTEMPTS = 2
"""Bench requests before the client's clock times one: a request of someone
else's (the canary's 1-token completion) finishing inside one spoils the
engine's timing of it."""
REASONING_BUDGET = 1024
"""Tokens a model may spend on a plan before its answer (the glm47 template)."""


def _copy_step(lane: str, label: str, text: str) -> PlannedStep:
    return PlannedStep(f"qualify copy {label}", lane,
                       f"POST /v1/chat/completions: copy the {len(text.split())}-word "
                       f"{label} passage verbatim (temperature 0)")


def plan_gate(lane: str, depth: int = 0) -> list[PlannedStep]:
    """What the gate sends, for the confirm modal and the journal's plan."""
    steps = [_copy_step(lane, label, text) for label, text in PASSAGES.items()]
    steps.append(PlannedStep("qualify identifiers", lane,
                             "POST /v1/chat/completions: echo 6 identifiers as JSON"))
    steps.append(PlannedStep("qualify bench", lane,
                             f"POST /v1/chat/completions: d{depth} c1, {BENCH_MAX_TOKENS} tokens"))
    return steps


async def bench_request(client: EngineClient, model: str, depth: int, *, timeout: float,
                        clock: Clock) -> Bench:
    """One bench request at concurrency 1 (the gate's smoke bench, each of
    ``sparktui bench``'s), timed on the engine's clock: its /metrics timers
    read before and after (core/qualify.py ``engine_timing``), so whoever asks,
    on whatever clock and however loaded, gets the engine's figures. An
    engine without the timers, or a request of someone else's finishing
    inside each of :data:`BENCH_ATTEMPTS` tries, is timed on ``clock`` and
    says so. RuntimeError when the request fails or streams no token."""
    prompt = bench_prompt(depth)
    client_timed: Bench | None = None
    for _ in range(BENCH_ATTEMPTS):
        before = await client.metrics()
        answer = await client.chat(model, prompt, max_tokens=BENCH_MAX_TOKENS, timeout=timeout,
                                   clock=clock.monotonic, fixed_length=True)
        if answer.error:
            raise RuntimeError(answer.error)
        if answer.ttft_s is None:
            raise RuntimeError("the bench request streamed no token")
        tokens = (answer.prompt_tokens or max(1, len(prompt) // 4), answer.completion_tokens or 0)
        client_timed = bench_from(depth, *tokens, answer.ttft_s, answer.decode_s or 0.0,
                                  BenchClock.CLIENT)
        if not exports_timers(before):
            break
        if (timing := engine_timing(before, await client.metrics())) is not None:
            return bench_from(depth, *tokens, timing.ttft_s, timing.decode_s, BenchClock.ENGINE)
    assert client_timed is not None  # BENCH_ATTEMPTS >= 1
    return client_timed


async def run_gate(run: WorkflowRun, lane: str, host: str, port: int, spec: QualifySpec,
                   *, depth: int = 0) -> GateResult:
    """The gate as steps of ``run`` (the serve's or the qualify workflow's)."""
    ctx = run.ctx
    clock = ctx.clock
    run.progress("qualify", lane, f"{lane}: {GateState.QUALIFYING}")
    copies: list[CopyCheck] = []
    ids: IdentifierCheck | None = None
    bench: Bench | None = None
    async with EngineClient(host, port, timeout=MODELS_TIMEOUT_S) as client:
        models = await client.models()
        if not models:
            return GateResult(lane, GateState.FAILED,
                              reasons=(f"{host}:{port}/v1/models lists no model",))
        model = models[0]

        async def ask(prompt: str, max_tokens: int, timeout: float) -> ChatAnswer:
            answer = await client.chat(model, prompt, max_tokens=max_tokens, timeout=timeout,
                                       clock=clock.monotonic)
            if answer.error:
                raise RuntimeError(answer.error)
            return answer

        try:
            for label, passage in PASSAGES.items():
                step = _copy_step(lane, label, passage)

                async def copy(label: str = label, passage: str = passage) -> CopyCheck:
                    answer = await ask(copy_prompt(passage),
                                       len(passage) // 2 + REASONING_BUDGET, COPY_TIMEOUT_S)
                    return check_copy(label, passage, answer.content)

                copies.append(await run.step(
                    step.step, lane, step.action, copy,
                    describe=lambda c: "clean" if not c.edits else
                    f"{c.edits} edits, CER {c.cer * 100:.2f} %: "
                    + ", ".join(s.quote() for s in c.spans[:3]),
                    detail=lambda c: c.to_json()))
            expected = identifiers(int(clock.time()))

            async def echo() -> IdentifierCheck:
                answer = await ask(identifier_prompt(expected), 256 + REASONING_BUDGET,
                                   IDS_TIMEOUT_S)
                return check_identifiers(expected, answer.content)

            ids = await run.step("qualify identifiers", lane,
                                 "POST /v1/chat/completions: echo 6 identifiers as JSON", echo,
                                 describe=lambda i: f"identifiers {i.ok}/{i.total}",
                                 detail=lambda i: i.to_json())

            async def measure() -> Bench:
                return await bench_request(client, model, depth, timeout=BENCH_TIMEOUT_S,
                                           clock=clock)

            bench = await run.step("qualify bench", lane,
                                   f"POST /v1/chat/completions: d{depth} c1, "
                                   f"{BENCH_MAX_TOKENS} tokens", measure,
                                   describe=Bench.describe, detail=Bench.to_json)
        except StepFailed as exc:
            return GateResult(lane, GateState.FAILED, tuple(copies), ids, bench,
                              (f"{exc.step}: {exc.message}",))
    result = judge(lane, tuple(copies), ids, bench, spec)
    run.progress("qualify", lane, f"{lane}: {result.describe()}")
    return result


def recipe_gate_spec(ctx: OpsContext, lane: str) -> tuple[QualifySpec, str]:
    """The lane's recipe thresholds (the lane name is the recipe name); the
    defaults, with a note, when the recipe is missing or invalid."""
    try:
        return load_recipe(ctx.config, lane).qualify, ""
    except InputError as exc:
        return QualifySpec(), f"recipe {lane!r} not loaded ({exc.problems[0]}): default thresholds"


def _recipe_port(config: Config, lane: str) -> int | None:
    """The API port the lane's recipe serves on (the lane name is the recipe
    name); None when the recipe cannot be loaded."""
    try:
        return load_recipe(config, lane).port
    except InputError:
        return None


def recipe_ceiling(config: Config, lane: str) -> int | None:
    """The lane's measured longest safe prompt (``[fit] prefill_ceiling_tokens``);
    None when unmeasured or the recipe cannot be loaded."""
    try:
        return load_recipe(config, lane).fit.prefill_ceiling_tokens
    except InputError:
        return None


def lane_prompt_length(config: Config, lane: str, tokens: int, what: str) -> Verdict:
    """The one prompt-length guard (ops/guards.py `prompt_length`) of a prompt of
    ``tokens`` to ``lane``, against its recipe's measured ceiling (unmeasured: the
    ladder's first rung): the gate's --depth, the ladder's rungs, the bench's
    depths and the demo's long prompt."""
    return prompt_length(lane, tokens, recipe_ceiling(config, lane), DEFAULT_RUNGS[0], what)


def recipe_window(config: Config, lane: str) -> int | None:
    """The lane's max_model_len (the lane name is the recipe name); None: unknown."""
    try:
        return load_recipe(config, lane).engine_args.max_model_len
    except InputError:
        return None


PROMPT_SLACK = 256
"""Tokens kept free in the window beside a prompt's context: the chat template and
the question after it."""


def within_window(lane: str, depth: int, window: int | None, reply_tokens: int,
                  what: str) -> Verdict:
    """A context of ``depth`` tokens (with its template and ``reply_tokens``) fits
    the lane's window, or the engine answers 400 to it: refused, never
    overridable (no override makes a window longer)."""
    if window is None:
        return Verdict("window", lane, True, f"{lane}'s window is unknown (its recipe does "
                                             f"not load): the engine bounds {what}")
    longest = max(0, window - reply_tokens - PROMPT_SLACK)
    if depth <= longest:
        return Verdict("window", lane, True, f"{what} of {depth:,} tokens fits {lane}'s "
                                             f"window (max_model_len {window:,})")
    return Verdict("window", lane, False,
                   f"{what} of {depth:,} tokens does not fit {lane}'s window: max_model_len "
                   f"{window:,} holds at most {longest:,} tokens of context beside the "
                   f"{reply_tokens} generated and {PROMPT_SLACK} for the template -> "
                   f"--depth at most {longest:,}")


def lane_needs(config: Config, lane: str) -> Needs:
    """What a workflow on a serving lane reads: every node, and the lane's port."""
    port = _recipe_port(config, lane)
    return Needs(nodes=tuple(config.nodes),
                 ports=tuple((n, port) for n in config.nodes) if port else ())


class OnServingLane:
    """A workflow on one serving lane (the gate, the ladder, the bench, a
    prompt): the lane is its target, and it reads what `lane_needs` says."""

    lane: str

    @property
    def target(self) -> str:
        return self.lane

    def needs(self, config: Config) -> Needs:
        return lane_needs(config, self.lane)


def serving_lane(state: OpsState, lane: str
                 ) -> tuple[tuple[RankContainer, ...], list[Verdict], RankContainer | None]:
    """A serving lane's ranks, its guards (`qualify_guards`) and rank 0 when it
    carries the API port: where the gate, the ladder and the bench send prompts."""
    ranks = tuple(discover_lanes(state.snapshot).get(lane, ()))
    verdicts = qualify_guards(state, lane, ranks, _recipe_port(state.config, lane))
    rank0 = next((r for r in ranks if r.rank == 0 and r.running and r.port is not None), None)
    return ranks, verdicts, rank0


def qualify_guards(state: OpsState, lane: str, ranks: Sequence[RankContainer],
                   port: int | None) -> list[Verdict]:
    """The lane exists, every rank runs, rank 0 carries its API port, and that
    port answers (the engine serves)."""
    if not ranks:
        return [Verdict("lane", lane, False,
                        f"no container labelled sparktui.lane={lane} on any node that "
                        f"answered -> serve it first (`sparktui serve {lane}`)")]
    out = [Verdict("lane", lane, True, f"{lane}: {len(ranks)} rank(s) found")]
    down = [r for r in ranks if not r.running]
    out.append(Verdict("serving", lane, not down,
                       f"{lane}: every rank runs" if not down else
                       f"{lane} is not serving: " + ", ".join(
                           f"rank {r.rank} on {r.node} exited" for r in down)
                       + f" -> read its log (`sparktui logs {lane}`)"))
    rank0 = next((r for r in ranks if r.rank == 0 and r.running and r.port is not None), None)
    if rank0 is None or rank0.port is None:
        out.append(Verdict("rank0", lane, False,
                           f"no running rank 0 of {lane} with a sparktui.port label -> "
                           f"nothing to ask"))
        return out
    out.append(Verdict("rank0", lane, True, f"rank 0 of {lane} on {rank0.node}, port "
                                            f"{rank0.port}"))
    subject = f"{rank0.node}:{rank0.port}"
    answered = state.ports.get((rank0.node, rank0.port)) if port == rank0.port else None
    if answered is None:
        out.append(Verdict("port", subject, True, f"{subject}: not checked (the recipe's "
                                                  f"port is {port or 'unknown'})"))
    else:
        out.append(Verdict("port", subject, answered,
                           f"{subject} answers" if answered else
                           f"{subject} does not answer: the engine is not serving yet -> "
                           f"wait for it (`sparktui wait {lane}`)"))
    return out


@dataclass(frozen=True)
class Qualify(OnServingLane):
    """``sparktui qualify LANE [--depth N]`` (and the console's qualify action):
    the gate on a serving lane. It changes nothing on the cluster, but it has
    its plan and guards like every workflow (the lane exists and serves)."""

    lane: str
    depth: int = 0
    overrides: frozenset[Override] = frozenset()
    kind: str = field(default="qualify", init=False)

    def plan(self, state: OpsState) -> Plan:
        _, verdicts, rank0 = serving_lane(state, self.lane)
        if self.depth > 0:
            what = f"the d{self.depth} bench prompt"
            verdicts.append(within_window(self.lane, self.depth,
                                          recipe_window(state.config, self.lane),
                                          BENCH_MAX_TOKENS, what))
            verdicts.append(lane_prompt_length(state.config, self.lane, self.depth, what))
        report = evaluate(verdicts, self.overrides)
        return Plan(self.kind, self.lane, report, tuple(plan_gate(self.lane, self.depth)), self,
                    detail={"lane": self.lane, "depth": self.depth,
                            "rank0": f"{rank0.node}:{rank0.port}" if rank0 else ""},
                    data=rank0)

    async def run(self, run: WorkflowRun, plan: Plan) -> None:
        ctx, lane = run.ctx, self.lane
        rank0: RankContainer = plan.data
        assert rank0.port is not None  # the rank0 guard passed
        spec, note = recipe_gate_spec(ctx, lane)
        result = await run_gate(run, lane, ctx.api_host(rank0.node), rank0.port, spec,
                                depth=self.depth)
        run.finish(result.passed, f"{lane}: {result.describe()}",
                   {"lane": lane, "qualify": result.detail(),
                    "endpoint": f"{ctx.api_host(rank0.node)}:{rank0.port}",
                    **({"note": note} if note else {})})


PREDICTED_OOM_STEP = "predicted oom"
"""The progress step under which serve reports an OOM prediction (target: the node)."""


@dataclass(frozen=True)
class LaneNews:
    """What a workflow event tells the console about a lane or a node: the gate's
    state (``qualifying``, ``qualified``, ``garbled``, ``slow``, ``failed``) or a
    predicted OOM, with the evidence and the next step for an alert."""

    subject: str
    """The lane (gate) or the node (predicted OOM)."""
    kind: str
    """``gate`` or ``predicted oom``."""
    state: str
    text: str
    evidence: tuple[str, ...] = ()
    next_step: str = ""

    @property
    def alarming(self) -> bool:
        return self.kind == PREDICTED_OOM_STEP or self.state in (
            GateState.GARBLED, GateState.SLOW, GateState.FAILED)


def oom_news(w: OomPredicted) -> LaneNews:
    return LaneNews(w.node, PREDICTED_OOM_STEP, "predicted", w.message(),
                    (w.message().partition(" -> ")[0],), w.next_step)


def lane_news(event: WorkflowEvent) -> LaneNews | None:
    """The gate or OOM news in a workflow event (serve's or qualify's), else None."""
    if isinstance(event, StepProgressed):
        if event.step == PREDICTED_OOM_STEP:
            what, _, step = event.message.partition(" -> ")
            return LaneNews(event.target, PREDICTED_OOM_STEP, "predicted", event.message,
                            (what,), step)
        if event.step == "qualify" and event.message.endswith(GateState.QUALIFYING):
            return LaneNews(event.target, "gate", GateState.QUALIFYING, "quality gate running")
        return None
    if isinstance(event, WorkflowFinished) and isinstance(gate := event.detail.get("qualify"),
                                                          dict):
        state = str(gate.get("state", ""))
        text = str(gate.get("summary", ""))
        evidence = tuple(str(r) for r in gate.get("reasons") or ()) or (text,)
        step = {"garbled": f"keep {event.target} off production; the quoted spans and every "
                           "answer are in the journal",
                "slow": f"compare with the recipe's figures: `sparktui qualify {event.target} "
                        "--depth 4096`",
                "failed": f"retry `sparktui qualify {event.target}` once the lane answers",
                }.get(state, "")
        return LaneNews(event.target, "gate", state, text, evidence, step)
    return None
