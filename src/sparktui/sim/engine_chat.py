"""What a simulated engine answers to a chat completion, as a model would.

A correct engine follows the two instructions the quality gate gives
(core/qualify.py): it copies the text between the markers, and it lists the
lines between the markers as a JSON ``identifiers`` array. Anything else gets
filler tokens. Faults come from the world, not from the prompt:

- a lane whose image and model are in ``SimSpec.garbling`` (the r37 lab tree
  on DS4.1) garbles copied prose with close-vocabulary character substitutions
  at the seeds' rate (~30 in a 300-word text) and leaves identifiers intact,
  as the seeds saw ("identifiers 6/6 PASS, structure clean");
- GLM checkpoints write their plan into the content first (the seeds' glm47
  template ignores ``thinking: false``).

Deterministic: the same prompt garbles the same way (temperature 0).
"""

from __future__ import annotations

import json
import math
import random
import re

BEGIN, END = "<<<BEGIN>>>", "<<<END>>>"
_QUOTED = re.compile(re.escape(BEGIN) + r"\n(.*?)\n" + re.escape(END), re.DOTALL)
GARBLE_WORD_RATE = 0.15
"""Share of words of four letters or more that get one typo (~30 in 300 words)."""
_CLOSE = {"о": "а", "а": "о", "е": "и", "и": "е", "я": "е", "ы": "и", "ё": "е",
          "e": "a", "a": "e", "i": "e", "o": "u", "u": "o"}
"""Vowels a garbling engine swaps for their neighbours (маштабировать, упровляемой)."""
PLAN = ("The user wants the text reproduced exactly. I will copy it character by character "
        "and add nothing else.\n\n")
"""What a GLM template that ignores ``thinking: false`` writes before the answer."""


def tokens(text: str) -> int:
    """About four characters a token."""
    return max(1, math.ceil(len(text) / 4))


def reply(prompt: str, *, model_repo: str, garbles: bool, seed: int) -> str | None:
    """The model's answer to a gate instruction; None for any other prompt."""
    m = _QUOTED.search(prompt)
    if m is None:
        return None
    quoted = m.group(1)
    if '"identifiers"' in prompt:
        answer = json.dumps({"identifiers": quoted.split("\n")}, ensure_ascii=False)
    else:
        answer = garble(quoted, random.Random(f"{seed}:garble:{quoted[:64]}")) if garbles \
            else quoted
    return (PLAN if "glm" in model_repo.lower() else "") + answer


def garble(text: str, rng: random.Random, rate: float = GARBLE_WORD_RATE) -> str:
    """One close-vocabulary typo in about ``rate`` of the words of 4+ letters."""
    def one(m: re.Match[str]) -> str:
        word = m.group(0)
        if len(word) < 4 or rng.random() >= rate:
            return word
        spots = [i for i, ch in enumerate(word) if i > 0 and ch in _CLOSE]
        if spots:
            i = rng.choice(spots)
            return word[:i] + _CLOSE[word[i]] + word[i + 1:]
        i = rng.randrange(1, len(word) - 1)
        return word[:i] + word[i + 1:]

    return re.sub(r"\w+", one, text)
