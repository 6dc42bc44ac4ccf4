"""The post-boot quality gate, pure: what to ask a lane and how to judge its answers.

A lane that boots, answers ``/health`` and streams a first token can still be
broken: the r37 lab tree garbled DS4.1's output ("маштабировать", "упровляемой",
~30 close-vocabulary typos in 300 words) while looking healthy in every other
way. So, after readiness, the lane is asked at temperature 0 to

- copy fixed ~300-word passages verbatim (Russian and English,
  core/qualify_text.py); the character error rate (Levenshtein distance over
  the source length) above ``max_cer`` makes it **garbled**, with the worst
  spans quoted;
- echo six generated identifiers (hex id, snake_case, a path, a number with
  separators, a UUID, a build tag) in a JSON answer: ``6/6`` or which differ;
- run a smoke bench at concurrency 1 (TTFT, decode and prefill tokens/s);
  decode below the recipe's floor makes it **slow**. The bench is timed on
  the engine's clock: its own ``/metrics`` histograms (time to first token,
  end-to-end latency) read before and after the one request, so the console
  and ``sparktui qualify`` print the same figures for the same lane whatever
  clock each runs on and however loaded its host is (the console on the
  simulator's clock once read "2 pp / 9.9 tg / 8,710 ms" where the CLI on
  wall time read "346 pp / 1649.8 tg / 55 ms"). Only an engine that exports
  neither histogram is timed on the client's clock, and the figures say so.

Reasoning models whose template ignores ``thinking: false`` write their plan
into the content before the answer (the seeds' glm47 template): a leading
reasoning block is skipped and reported, never counted as damage.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

from .qualify_text import PASSAGES
from .recipe import QualifySpec

BEGIN, END = "<<<BEGIN>>>", "<<<END>>>"
"""Markers around the text the lane must copy or echo."""
HEAD_CHARS = 60
"""How much of a passage's start locates the copy after a reasoning block."""
HEAD_MIN_SCORE = 80.0
"""Similarity (0-100) at which that start counts as found."""
SPANS = 6
"""Worst spans quoted as evidence."""
BENCH_MAX_TOKENS = 128
BENCH_PROMPT = "Write a short story about an operator who watches a cluster through the night."
_THINK_END = re.compile(r"</think>|</reasoning>", re.IGNORECASE)
_WORDS = ("kv", "cache", "block", "pool", "rank", "shard", "engram", "drafter", "graph",
          "barrier", "fabric", "tensor", "prefill", "decode", "router", "expert")


class GateState(StrEnum):
    """A lane's qualification, after it is serving."""

    SERVING = "serving"
    QUALIFYING = "qualifying"
    QUALIFIED = "qualified"
    GARBLED = "garbled"
    SLOW = "slow"
    FAILED = "failed"
    """The gate could not run to the end (the API erred or timed out)."""


# ---- what to ask ---------------------------------------------------------------------------
def identifiers(seed: int) -> tuple[str, ...]:
    """Six identifiers of the kinds a garbling engine breaks first, from ``seed``."""
    rng = random.Random(f"qualify-identifiers:{seed}")
    words = rng.sample(_WORDS, 3)
    shards = rng.randint(40, 160)
    return (
        f"{rng.getrandbits(64):016x}",
        "_".join(words) + f"_{rng.randint(2, 97)}",
        f"/mnt/nas/hf-cache/models--{words[0]}-lab--{words[1]}-{rng.randint(2, 9)}b/snapshots/"
        f"{rng.getrandbits(40):010x}/model-{rng.randint(1, shards):05d}-of-{shards:05d}"
        ".safetensors",
        f"{rng.randint(1_000_000, 9_999_999_999):,}.{rng.randint(0, 99):02d}",
        str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        f"r{rng.randint(30, 49)}-dev{rng.randint(60, 99)}+g{rng.getrandbits(36):09x}",
    )


def copy_prompt(passage: str) -> str:
    return (f"Copy the text between {BEGIN} and {END} exactly, character for character, "
            f"keeping every word, letter and punctuation mark. Answer with the copied text "
            f"only.\n{BEGIN}\n{passage}\n{END}")


def identifier_prompt(ids: tuple[str, ...]) -> str:
    return ('Answer with one JSON object {"identifiers": [...]} that lists the strings between '
            f"{BEGIN} and {END} unchanged, in the same order, and nothing else.\n{BEGIN}\n"
            + "\n".join(ids) + f"\n{END}")


def bench_prompt(depth: int) -> str:
    """The smoke bench's prompt: a short request (d0), or ~``depth`` tokens of
    context before it (about four characters per token)."""
    if depth <= 0:
        return BENCH_PROMPT
    filler = " ".join(PASSAGES.values())
    context = (filler * (depth * 4 // len(filler) + 1))[:depth * 4]
    return f"{context}\n\n{BENCH_PROMPT}"


# ---- how to judge ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Span:
    """One damaged stretch of a copy, widened to whole words."""

    expected: str
    got: str
    at: int
    """Offset in the passage."""
    edits: int

    def quote(self) -> str:
        return f"«{self.got}» for «{self.expected}»"


@dataclass(frozen=True)
class CopyCheck:
    label: str
    """Passage label, ``RU`` or ``EN``."""
    words: int
    chars: int
    edits: int
    spans: tuple[Span, ...]
    reasoning_chars: int
    """Length of a leading reasoning block that was skipped (0: none)."""

    @property
    def cer(self) -> float:
        return self.edits / self.chars if self.chars else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "words": self.words, "chars": self.chars,
                "edits": self.edits, "cer": round(self.cer, 5),
                "reasoning_chars": self.reasoning_chars,
                "spans": [{"expected": s.expected, "got": s.got, "at": s.at, "edits": s.edits}
                          for s in self.spans]}


def split_reasoning(answer: str, reference: str) -> tuple[str, str]:
    """(the answer proper, the leading reasoning block skipped — "" when none).

    A ``</think>`` ends a reasoning block; without tags, text before the place
    where the reference's first words are found (fuzzily: they may be damaged),
    ending in a line break, is a plan the model wrote into its content; other
    text before the copy is damage."""
    reasoning = ""
    text = answer
    ends = list(_THINK_END.finditer(text))
    if ends:
        reasoning, text = text[:ends[-1].end()], text[ends[-1].end():]
    head = reference[:HEAD_CHARS]
    stripped = text.lstrip()
    if head and not stripped.startswith(head[:20]):
        found = fuzz.partial_ratio_alignment(head, text)
        if (found is not None and found.score >= HEAD_MIN_SCORE and found.dest_start > 0
                and text[:found.dest_start].rstrip(" \t").endswith("\n")):
            reasoning += text[:found.dest_start]
            text = text[found.dest_start:]
    return text.strip(), reasoning.strip()


def check_copy(label: str, reference: str, answer: str, limit: int = SPANS) -> CopyCheck:
    body, reasoning = split_reasoning(answer, reference)
    edits = Levenshtein.distance(reference, body)
    return CopyCheck(label, len(reference.split()), len(reference), edits,
                     worst_spans(reference, body, limit) if edits else (), len(reasoning))


def worst_spans(reference: str, copy: str, limit: int = SPANS) -> tuple[Span, ...]:
    """The damaged words with the most edits (then the earliest), as evidence."""
    merged: list[list[int]] = []  # [ref start, ref end, copy start, copy end, edits]
    for op in Levenshtein.opcodes(reference, copy):
        if op.tag == "equal":
            continue
        s0, s1 = _word_bounds(reference, op.src_start, op.src_end)
        d0, d1 = _word_bounds(copy, op.dest_start, op.dest_end)
        edits = max(op.src_end - op.src_start, op.dest_end - op.dest_start)
        if merged and s0 <= merged[-1][1]:
            last = merged[-1]
            last[1], last[3], last[4] = max(last[1], s1), max(last[3], d1), last[4] + edits
        else:
            merged.append([s0, s1, d0, d1, edits])
    ranked = sorted(merged, key=lambda m: (-m[4], m[0]))[:limit]
    return tuple(Span(reference[m[0]:m[1]], copy[m[2]:m[3]], m[0], m[4])
                 for m in sorted(ranked, key=lambda m: m[0]))


def _word_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    while start > 0 and text[start - 1].isalnum():
        start -= 1
    while end < len(text) and text[end].isalnum():
        end += 1
    return start, end


@dataclass(frozen=True)
class IdentifierCheck:
    expected: tuple[str, ...]
    got: tuple[str, ...] | None
    """What the JSON answer listed; None when no JSON object with the list was found."""

    @property
    def total(self) -> int:
        return len(self.expected)

    @property
    def ok(self) -> int:
        got = self.got or ()
        return sum(1 for i, e in enumerate(self.expected) if i < len(got) and got[i] == e)

    def differing(self) -> list[tuple[str, str]]:
        """(expected, what came back) for each identifier that differs."""
        got = self.got or ()
        return [(e, got[i] if i < len(got) else "(missing)")
                for i, e in enumerate(self.expected) if i >= len(got) or got[i] != e]

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "total": self.total, "expected": list(self.expected),
                "got": list(self.got) if self.got is not None else None}


def parse_identifiers(answer: str) -> tuple[str, ...] | None:
    """The ``identifiers`` list of the last JSON object in the answer (reasoning
    or a code fence around it are tolerated)."""
    decoder = json.JSONDecoder()
    found: tuple[str, ...] | None = None
    for m in re.finditer(r"\{", answer):
        try:
            obj, _ = decoder.raw_decode(answer, m.start())
        except ValueError:
            continue
        items = obj.get("identifiers") if isinstance(obj, dict) else None
        if isinstance(items, list):
            found = tuple(str(x) for x in items)
    return found


def check_identifiers(expected: tuple[str, ...], answer: str) -> IdentifierCheck:
    return IdentifierCheck(expected, parse_identifiers(answer))


class BenchClock(StrEnum):
    """Whose clock timed a bench."""

    ENGINE = "engine"
    """The engine's own /metrics histograms: the clock its tokens are made on."""
    CLIENT = "client"
    """The asking process's clock: the engine exports no timer, or another
    request finished inside each try."""


ENGINE_TIMERS = (("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"),
                 ("sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds"))
"""The histograms vLLM and SGLang time each request with (TTFT, end to end)."""


@dataclass(frozen=True)
class EngineTiming:
    """One request as the engine timed it."""

    ttft_s: float
    decode_s: float
    """End to end less time to first token."""


def exports_timers(metrics: Mapping[str, float]) -> bool:
    """Does this ``/metrics`` answer (``parse_metrics``) carry both timers?"""
    return any(f"{t}_count" in metrics and f"{e}_count" in metrics for t, e in ENGINE_TIMERS)


def engine_timing(before: Mapping[str, float], after: Mapping[str, float]
                  ) -> EngineTiming | None:
    """The one request that finished between two ``/metrics`` answers, on the
    engine's clock: each timer's sum grown, when each count grew by exactly
    one (None otherwise: another request ran meanwhile, or no timer)."""
    for ttft, e2e in ENGINE_TIMERS:
        if f"{ttft}_count" not in after or f"{e2e}_count" not in after:
            continue
        grown = {n: (after[f"{n}_count"] - before.get(f"{n}_count", 0.0),
                     after.get(f"{n}_sum", 0.0) - before.get(f"{n}_sum", 0.0))
                 for n in (ttft, e2e)}
        if any(count != 1 for count, _ in grown.values()):
            return None
        first, whole = grown[ttft][1], grown[e2e][1]
        if first <= 0 or whole < first - 1e-6:  # a sum that fell: the engine restarted
            return None
        return EngineTiming(first, max(0.0, whole - first))
    return None


@dataclass(frozen=True)
class Bench:
    """One request at concurrency 1: the seeds' "d0 c1: 892 pp / 33.2 tg / 2,193 ms"."""

    depth: int
    prompt_tokens: int
    completion_tokens: int
    ttft_ms: float
    decode_tps: float | None
    """Tokens after the first over the time after the first; None with one token."""
    prefill_tps: float
    clock: BenchClock = BenchClock.ENGINE

    def describe(self) -> str:
        tg = f"{self.decode_tps:.1f}" if self.decode_tps is not None else "?"
        on = " (on the client's clock)" if self.clock is BenchClock.CLIENT else ""
        return (f"d{self.depth} c1: {self.prefill_tps:,.0f} pp / {tg} tg / "
                f"{self.ttft_ms:,.0f} ms{on}")

    def to_json(self) -> dict[str, Any]:
        return {"depth": self.depth, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "ttft_ms": round(self.ttft_ms, 1),
                "decode_tps": None if self.decode_tps is None else round(self.decode_tps, 2),
                "prefill_tps": round(self.prefill_tps, 1), "clock": self.clock.value}


def bench_from(depth: int, prompt_tokens: int, completion_tokens: int, ttft_s: float,
               decode_s: float, clock: BenchClock) -> Bench:
    decode = ((completion_tokens - 1) / decode_s
              if completion_tokens > 1 and decode_s > 0 else None)
    return Bench(depth, prompt_tokens, completion_tokens, ttft_s * 1000.0, decode,
                 prompt_tokens / ttft_s if ttft_s > 0 else 0.0, clock)


def compare(bench: Bench, spec: QualifySpec) -> str:
    """The bench beside the recipe's recorded figures ("" when none are recorded)."""
    parts = []
    for name, now, then, unit in (("prefill", bench.prefill_tps, spec.prefill_tps, "pp"),
                                  ("decode", bench.decode_tps, spec.decode_tps, "tg"),
                                  ("TTFT", bench.ttft_ms, spec.ttft_ms, "ms")):
        if now is None or not then:
            continue
        parts.append(f"{name} {now:,.1f} vs {then:,.1f} {unit} ({(now / then - 1) * 100:+.0f}%)")
    return "vs recorded: " + ", ".join(parts) if parts else ""


@dataclass(frozen=True)
class GateResult:
    lane: str
    state: GateState
    copies: tuple[CopyCheck, ...] = ()
    identifiers: IdentifierCheck | None = None
    bench: Bench | None = None
    reasons: tuple[str, ...] = ()
    """Why the lane is not qualified, with the numbers."""
    comparison: str = ""

    @property
    def passed(self) -> bool:
        """The lane is qualified. A workflow that ran the gate (``qualify``, or
        ``serve`` after readiness) succeeds only then: a garbled, slow or
        failed gate makes it fail (exit non-zero), whatever else went well."""
        return self.state is GateState.QUALIFIED

    @property
    def cer(self) -> float | None:
        """The worst passage's character error rate."""
        return max((c.cer for c in self.copies), default=None)

    @property
    def reasoning_chars(self) -> int:
        return max((c.reasoning_chars for c in self.copies), default=0)

    def to_json(self) -> dict[str, Any]:
        """`sparktui qualify --json`: exactly these keys."""
        cer = self.cer
        b = self.bench
        return {
            "lane": self.lane, "state": self.state.value,
            "cer": None if cer is None else round(cer, 5),
            "identifiers_ok": self.identifiers.ok if self.identifiers else None,
            "identifiers_total": self.identifiers.total if self.identifiers else None,
            "ttft_ms": round(b.ttft_ms, 1) if b else None,
            "decode_tps": round(b.decode_tps, 2) if b and b.decode_tps is not None else None,
            "prefill_tps": round(b.prefill_tps, 1) if b else None,
        }

    def detail(self) -> dict[str, Any]:
        """Everything, for the journal."""
        return {**self.to_json(), "copies": [c.to_json() for c in self.copies],
                "identifiers": self.identifiers.to_json() if self.identifiers else None,
                "bench": self.bench.to_json() if self.bench else None,
                "reasons": list(self.reasons), "comparison": self.comparison,
                "summary": self.describe()}

    def describe(self) -> str:
        """One line in the seeds' style: "quality gate PASSED (RU 300-word text clean,
        identifiers 6/6); d0 c1: 892 pp / 33.2 tg / 2,193 ms"."""
        return describe_gate(self.to_json() | {"copies": [c.to_json() for c in self.copies],
                                               "reasons": list(self.reasons),
                                               "bench": self.bench.to_json() if self.bench
                                               else None})


def describe_gate(d: dict[str, Any]) -> str:
    """The one-line verdict from a journaled gate detail (see ``GateResult.detail``)."""
    state = d.get("state", "?")
    parts = []
    for c in d.get("copies") or []:
        if c["edits"] == 0:
            parts.append(f"{c['label']} {c['words']}-word text clean")
        else:
            quoted = ", ".join(f"«{s['got']}» for «{s['expected']}»"
                               for s in (c.get("spans") or [])[:3])
            parts.append(f"{c['label']} {c['words']}-word text: {c['edits']} edits, "
                         f"CER {c['cer'] * 100:.2f} %" + (f" ({quoted})" if quoted else ""))
    if d.get("identifiers_total"):
        parts.append(f"identifiers {d['identifiers_ok']}/{d['identifiers_total']}")
    head = {"qualified": "quality gate PASSED", "garbled": "quality gate: GARBLED",
            "slow": "quality gate: SLOW", "failed": "quality gate: could not run"}.get(
        state, f"quality gate: {state}")
    sep = "; " if any(c["edits"] for c in d.get("copies") or []) else ", "
    text = f"{head} ({sep.join(parts)})" if parts else head
    if state in ("slow", "failed") and d.get("reasons"):
        text += ": " + "; ".join(d["reasons"])
    reasoning = max((c.get("reasoning_chars", 0) for c in d.get("copies") or []), default=0)
    if reasoning:
        text += (f"; a leading reasoning block ({reasoning} chars) was skipped: the template "
                 "writes its plan into the content")
    if (b := d.get("bench")) is not None:  # a bench journaled before "clock" was the client's
        text += "; " + Bench(b["depth"], b["prompt_tokens"], b["completion_tokens"],
                             b["ttft_ms"], b["decode_tps"], b["prefill_tps"],
                             BenchClock(b.get("clock", BenchClock.CLIENT))).describe()
    return text


def judge(lane: str, copies: tuple[CopyCheck, ...], ids: IdentifierCheck | None,
          bench: Bench | None, spec: QualifySpec) -> GateResult:
    """Garbled (damaged text or identifiers) wins over slow (decode below the floor)."""
    reasons: list[str] = []
    for c in copies:
        if c.cer > spec.max_cer:
            reasons.append(f"{c.label}: CER {c.cer * 100:.2f} % > {spec.max_cer * 100:.2f} % "
                           f"({c.edits} edits in {c.chars:,} chars)")
    if ids is not None and ids.ok < ids.total:
        diff = "; ".join(f"{e!r} came back as {g!r}" for e, g in ids.differing())
        reasons.append(f"identifiers {ids.ok}/{ids.total}: {diff}")
    state = GateState.GARBLED if reasons else GateState.QUALIFIED
    floor = spec.decode_tps_min
    if not reasons and bench is not None and floor is not None and (
            bench.decode_tps is None or bench.decode_tps < floor):
        tg = f"{bench.decode_tps:.1f}" if bench.decode_tps is not None else "no"
        reasons.append(f"decode {tg} tg < the recipe's floor {floor:g} tg "
                       "(qualify.decode_tps_min)")
        state = GateState.SLOW
    comparison = compare(bench, spec) if bench is not None else ""
    return GateResult(lane, state, copies, ids, bench, tuple(reasons), comparison)
