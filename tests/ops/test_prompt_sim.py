"""The demo's long-prompt trigger is guarded (ops/workflows/prompt.py): the
seeds' 150K prompt to the 22:45 lane, whose envelope is unmeasured, is refused
by the prompt-length guard and nothing is sent; overridden (the lane's name
typed, journaled with the override) it is sent, so the incident can still be
reproduced; within a measured ceiling it goes without an override."""

from __future__ import annotations

from sparktui.ops.confirm import confirmation_for
from sparktui.ops.guards import Override
from sparktui.ops.recipe_record import record
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.prompt import LanePrompt

from .test_qualify_sim import boot

INCIDENT = "glm53-mxfp4-fp8-4x-r39-196k"
TOKENS = 150_000


async def test_the_150k_prompt_is_refused_until_overridden_by_name(sim_ctx):
    async with sim_ctx("long-prompt", speed=None) as (sim, ctx, _):
        lane = await boot(sim, ctx, INCIDENT)
        sent: list[int] = []

        def send() -> None:
            sent.append(TOKENS)
            sim.run_prompt(lane, TOKENS)

        refused = await prepare(ctx, LanePrompt(lane, TOKENS, send))
        assert not refused.allowed
        (v,) = refused.report.refused
        assert v.guard == "prompt-length" and v.override is Override.PROMPT_LENGTH
        assert "whose prefill envelope is not measured" in v.message
        assert refused.report.needed_overrides() == {Override.PROMPT_LENGTH}
        result = await execute(ctx, refused)
        assert not result.ok and result.message.startswith("refused") and sent == []

        forced = await prepare(ctx, LanePrompt(lane, TOKENS, send,
                                               frozenset({Override.PROMPT_LENGTH})))
        assert forced.allowed and forced.report.overridden
        conf = confirmation_for(forced.workflow, forced.target, forced.report)
        assert conf.typed and not conf.yes_allowed and conf.accepts(lane)
        result = await execute(ctx, forced)
        assert result.ok and result.message == f"sent a {TOKENS:,}-token prompt to {lane}"
        assert sent == [TOKENS]
        assert any(r.prompt_tokens == TOKENS for r in sim.lane_rank0(lane).requests)
        overrides = [e for e in ctx.journal.entries()
                     if e.kind == "override" and e.workflow == "prompt"]
        assert [e.detail["overrides"] for e in overrides] == [["prompt-length"]]


async def test_a_prompt_within_the_measured_ceiling_needs_no_override(sim_ctx):
    async with sim_ctx("normal", speed=None) as (sim, ctx, _):
        lane = await boot(sim, ctx, INCIDENT)
        record(ctx.config, lane, {"fit.prefill_ceiling_tokens": 160_000}, note="test")
        plan = await prepare(ctx, LanePrompt(lane, TOKENS, lambda: None))
        assert plan.allowed and not plan.report.overridden
        record(ctx.config, lane, {"fit.prefill_ceiling_tokens": 120_000}, note="test")
        plan = await prepare(ctx, LanePrompt(lane, TOKENS, lambda: None))
        (v,) = plan.report.refused
        assert "exceeds" in v.message and "120,000 tokens" in v.message
