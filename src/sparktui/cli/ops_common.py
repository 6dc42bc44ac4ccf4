"""What the workflow commands (serve, stop, power, recover, runlock) share:
the one route into a workflow (`drive`: plan, show, confirm, execute the same
plan; `drive_lane` for the commands that prompt a serving lane: qualify,
envelope, bench), ``--dry-run [--json]``, progress on stderr, the confirmation
rule of ops/confirm.py read from stdin, unfinished workflows offered at start,
and the exit codes.

Exit codes: 0 done (``--dry-run``: allowed), 1 failed, 2 bad input, 3 refused
by a guard, 4 not confirmed (nothing was done).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from sparktui.adapters.endpoints import EndpointError
from sparktui.core.config import Config
from sparktui.core.envelope import parse_counts
from sparktui.ops.confirm import Confirmation, confirmation_for
from sparktui.ops.context import OpsContext, open_context
from sparktui.ops.events import Emit, WorkflowEvent, WorkflowFinished, format_event
from sparktui.ops.guards import Override, parse_overrides
from sparktui.ops.plan import Plan, Workflow, outcome
from sparktui.ops.resume import offers
from sparktui.ops.workflows.execute import execute, prepare
from sparktui.ops.workflows.runner import WorkflowResult

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_REFUSED, EXIT_DECLINED = 0, 1, 2, 3, 4


def run_async(command: str, main: Callable[[Config, argparse.Namespace], Awaitable[int]],
              args: argparse.Namespace) -> int:
    """Load the config and run ``main`` to its exit code; nodes or Home Assistant
    that cannot be resolved (e.g. the simulator is not running) exit 1, named."""
    from .common import load

    config = load(args)
    try:
        return asyncio.run(_terminable(main(config, args)))
    except EndpointError as exc:
        print(f"sparktui {command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except asyncio.CancelledError:
        print(f"sparktui {command}: terminated (SIGTERM)", file=sys.stderr)
        return 143


async def _terminable(work: Awaitable[int]) -> int:
    """SIGTERM cancels the command as Ctrl-C does, so a workflow in progress says
    what it left behind (e.g. a plug's state and the resume command)."""
    task = asyncio.current_task()
    assert task is not None
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return await work


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--yes", "-y", action="store_true",
                   help="confirm without asking (not for overrides)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (every guard verdict and every step) and run nothing; "
                        "exit 0 when it would be allowed, 3 when refused")


async def drive(ctx: OpsContext, workflow: Workflow, args: argparse.Namespace,
                after: Callable[[WorkflowResult], None] | None = None) -> int:
    """The one route from a command into a workflow: plan from a fresh observation,
    show it (``--dry-run``: print it and stop), confirm, then execute that plan
    (re-checked before the first step); ``after`` is given the result once it is
    printed (serve: what the boot measured, and the question to record it)."""
    plan = await prepare(ctx, workflow)
    if args.dry_run:
        return dry_run(plan, args.json)
    show_offers(ctx)
    show_plan(plan)
    if plan.allowed and not confirm(confirmation_for(plan.workflow, plan.target, plan.report),
                                    yes=args.yes):
        return EXIT_DECLINED
    result = await execute(ctx, plan)
    code = finish(result, args.json)
    if after is not None:
        after(result)
    return code


def add_prompt_override(p: argparse.ArgumentParser) -> None:
    """``--override prompt-length`` on the commands that send long prompts (qualify
    --depth, envelope): the operator types the lane's name to go on."""
    p.add_argument("--override", action="append", default=[], metavar="GUARD",
                   help="override an overridable refusal (prompt-length: a prompt beyond "
                        "the lane's measured ceiling); the lane's name is typed to confirm")


def count_list(flag: str, lo: int, hi: int) -> Callable[[str], tuple[int, ...]]:
    """The argparse type of a comma list of counts (core/envelope.py `parse_counts`):
    a bad item is a usage error naming the flag."""
    def parse(text: str) -> tuple[int, ...]:
        try:
            return parse_counts(text, flag, lo, hi)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def prompt_overrides(command: str, args: argparse.Namespace) -> frozenset[Override] | None:
    """The parsed ``--override`` names; None (after saying why) when one is unknown."""
    try:
        return parse_overrides(n for arg in args.override for n in arg.split(",") if n)
    except ValueError as exc:
        print(f"sparktui {command}: {exc}", file=sys.stderr)
        return None


async def drive_lane(config: Config, command: str, args: argparse.Namespace,
                     workflow: Callable[[frozenset[Override]], Workflow],
                     show: Callable[[WorkflowResult], None]) -> int:
    """The one route of the commands that prompt a serving lane (qualify,
    envelope, bench): ``--override`` parsed, the plan from a fresh observation
    (``--dry-run``: printed, nothing sent), shown unless ``--json`` of an allowed
    plan, an overridden refusal confirmed by the typed name (`confirm_overrides`),
    that plan executed, and ``show`` given the result. Exit 0 done, 1 failed,
    2 a bad ``--override``, 3 refused, 4 not confirmed."""
    overrides = prompt_overrides(command, args)
    if overrides is None:
        return EXIT_INPUT
    async with open_context(config, emit=stderr_printer()) as ctx:
        plan = await prepare(ctx, workflow(overrides))
        if args.dry_run:
            return dry_run(plan, args.json)
        if not args.json or not plan.allowed:
            show_plan(plan)
        if plan.allowed and not confirm_overrides(plan):
            return EXIT_DECLINED
        result = await execute(ctx, plan)
    show(result)
    if result.ok:
        return EXIT_OK
    refused = result.report is not None and not result.report.allowed
    return EXIT_REFUSED if refused else EXIT_FAILED


def confirm_overrides(plan: Plan, stdin: TextIO | None = None) -> bool:
    """A plan with an overridden refusal goes on only with its target typed (never
    ``--yes``); one without needs nothing (these commands only read and prompt)."""
    if not plan.report.overridden:
        return True
    return confirm(confirmation_for(plan.workflow, plan.target, plan.report), yes=False,
                   stdin=stdin)


def dry_run(plan: Plan, as_json: bool) -> int:
    """``--dry-run [--json]``: print the plan, run nothing; exit 0 allowed, 3 refused."""
    if as_json:
        json.dump(plan.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        show_plan(plan)
    return EXIT_OK if plan.allowed else EXIT_REFUSED


def stderr_printer(stream: TextIO | None = None, *, final: bool = False) -> Emit:
    """Progress lines on stderr. The result line goes to stdout (`finish`), so the
    final event is echoed only when stdout carries JSON (``final``)."""

    def emit(event: WorkflowEvent) -> None:
        if isinstance(event, WorkflowFinished) and not final:
            return
        line = format_event(event)
        if line:
            print(line, file=stream or sys.stderr, flush=True)

    return emit


def show_offers(ctx: OpsContext) -> None:
    for offer in offers(ctx.journal, ctx):
        print(f"UNFINISHED: {offer.what}", file=sys.stderr)
        if offer.action:
            print(f"  to complete: {offer.action}", file=sys.stderr)
        else:
            print(f"  close it: `sparktui power resume {offer.record.wf} --close REASON`",
                  file=sys.stderr)


def show_plan(plan: Plan) -> None:
    err = sys.stderr
    report = plan.report
    for v in report.verdicts:
        print(f"  [{outcome(v)}] {v.guard} {v.subject}: {v.message}", file=err)
    if report.refused:
        needed = report.needed_overrides()
        if needed and not report.blocking():
            print(f"  (overridable with --override {','.join(sorted(needed))})", file=err)
        return
    if plan.steps:
        print("what will happen:", file=err)
        for i, s in enumerate(plan.steps, 1):
            print(f"  {i}. {s.describe()}", file=err)


def confirm(conf: Confirmation, *, yes: bool, stdin: TextIO | None = None) -> bool:
    """True when the operator confirmed; refuses without a terminal unless ``--yes``
    stands in (never for overrides)."""
    stdin = stdin or sys.stdin
    if yes and conf.yes_allowed:
        return True
    if not stdin.isatty():
        why = ("an override needs the name typed at a terminal (--yes does not stand in)"
               if not conf.yes_allowed else "stdin is not a terminal: pass --yes to confirm")
        print(f"not confirmed: {why}; nothing was done", file=sys.stderr)
        return False
    print(conf.prompt(), end="", file=sys.stderr, flush=True)
    answer = stdin.readline()
    if not conf.accepts(answer):
        print("not confirmed; nothing was done", file=sys.stderr)
        return False
    return True


def finish(result: WorkflowResult, as_json: bool, extra: dict[str, Any] | None = None) -> int:
    if as_json:
        json.dump({**result.to_json(), **(extra or {})}, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print(f"{result.kind} {result.target}: {'done' if result.ok else 'FAILED'}: "
              f"{result.message}")
    if result.ok:
        return EXIT_OK
    return EXIT_REFUSED if result.message.startswith("refused") else EXIT_FAILED
