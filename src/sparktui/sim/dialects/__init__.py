"""The engines' dialects as data: every log line and shape the console reads,
as the engine's own source writes it, with its ``file:line`` at that wheel's
version (``vllm-0.33.json``, ``vllm-0.11.json``, ``sglang-0.5.json``, written
by scripts/engine_dialects.py from the PyPI wheels; docs/DIALECTS.md).

The simulator and the golden transcripts (tests/fixtures/dialects/) are both
rendered from these strings, never from our notes, so a parser tested on
either is tested on what the engine prints. A line is a record: a message
from ``msg(key, *args)`` (``%`` formats filled as logging does, f-string
fields in order) under the logger prefix of the version (``record``).
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from sparktui.core.config import SIM_DIALECTS, SimulatorConfig

NAMES = SIM_DIALECTS
"""The dialects there are (``[simulator] dialect`` accepts exactly these)."""
DEFAULT = SimulatorConfig.dialect
HERE = Path(__file__).resolve().parent
_PERCENT = re.compile(r"%(?:\((\w+)\))?[-#0 +]*(?:\d+)?(?:\.\d+)?[sdfxr%]")
_FIELD = re.compile(r"\{([^{}]*)\}")
_CYAN, _RESET = "\033[1;36m", "\033[0;0m"
"""vLLM 0.11's process prefix colours (``utils/__init__.py:3463``), always written."""


class DialectError(ValueError):
    pass


@dataclass(frozen=True)
class Entry:
    text: str
    source: str
    """``path/in/wheel.py:LINE``."""

    @property
    def where(self) -> str:
        """``file.py:LINE`` as vLLM's ``[%(fileinfo)s:%(lineno)d]`` shows it."""
        path, _, line = self.source.rpartition(":")
        return f"{posixpath.basename(path)}:{line}"


def _fill_field(spec: str, value: object) -> str:
    fmt = spec.rpartition(":")[2] if ":" in spec else ""
    if fmt and isinstance(value, (int, float)):
        return format(value, fmt)
    return str(value)


def fill(template: str, args: Sequence[object]) -> str:
    """``template`` with ``args`` in order: ``%`` directives as logging fills
    them, else f-string fields (``{expression[:spec]}``) one by one."""
    if _PERCENT.search(template):
        return template % tuple(args) if args else template
    it = iter(args)
    missing: list[str] = []

    def one(m: re.Match[str]) -> str:
        try:
            return _fill_field(m.group(1), next(it))
        except StopIteration:
            missing.append(m.group(1))
            return m.group(0)

    out = _FIELD.sub(one, template)
    if missing:
        raise DialectError(f"{template[:60]!r}: no value for {missing}")
    return out


@dataclass(frozen=True)
class Dialect:
    name: str
    engine: str
    version: str
    lines: Mapping[str, Entry]

    @property
    def vllm(self) -> bool:
        return self.engine == "vllm"

    def entry(self, key: str) -> Entry:
        try:
            return self.lines[key]
        except KeyError:
            raise DialectError(f"{self.name}: no line {key!r}") from None

    def has(self, key: str) -> bool:
        return key in self.lines

    @property
    def reasoning_key(self) -> str:
        """The delta field a reasoning parser streams into (``reasoning`` in
        vLLM 0.33, ``reasoning_content`` before and in SGLang)."""
        return self.entry("delta_reasoning").text.split(":", 1)[0].strip()

    def msg(self, key: str, *args: object) -> str:
        return fill(self.entry(key).text, args)

    def record(self, message: str, *, when: float, where: str = "", proc: str = "",
               pid: int = 1, level: str = "INFO", tp: str = "") -> list[str]:
        """The physical lines one logging record prints: vLLM 0.33 repeats its
        header after every ``\\n`` of a message (``logging_utils/formatter.py:77``,
        so each ends in ``\\r``); vLLM 0.11 prints the message's lines raw behind
        its process prefix; SGLang prints them raw (``[date TPn] `` once)."""
        t = datetime.fromtimestamp(when, tz=UTC)
        if self.name == "vllm-0.33":
            head = f"({proc} pid={pid}) {level} {t:%m-%d %H:%M:%S} [{where}] "
            return (head + message.replace("\n", "\r\n" + head)).split("\n")
        if self.name == "vllm-0.11":
            pre = f"{_CYAN}({proc} pid={pid}){_RESET} "
            first, *rest = message.split("\n")
            return [f"{pre}{level} {t:%m-%d %H:%M:%S} [{where}] {first}",
                    *(pre + line for line in rest)]
        first, *rest = message.split("\n")
        return [f"[{t:%Y-%m-%d %H:%M:%S}{tp}] {first}", *rest]

    def uvicorn(self, message: str, *, when: float) -> str:
        """One of uvicorn's own INFO lines (``Started server process [1]``,
        ``Uvicorn running on ...``, an access line's ``client - "request"
        status``) in the engine's format for them: SGLang's ``uvicorn_format``
        (its date first; its access format is the same around the access
        fields, ``srt/utils/common.py:3516``), else uvicorn's default
        ``%(levelprefix)s %(message)s`` (0.55 ``config.py:89``; vLLM passes no
        log config unless asked). The level is padded to 9 columns (``logging.py:64``)."""
        fmt = self.lines["uvicorn_format"].text if self.has("uvicorn_format") \
            else "%(levelprefix)s %(message)s"
        stamp = f"{datetime.fromtimestamp(when, tz=UTC):%Y-%m-%d %H:%M:%S}"
        return fmt.replace("%(asctime)s", stamp).replace("%(levelprefix)s", "INFO:    ") \
            .replace("%(message)s", message)

    def raw(self, lines: Sequence[str], *, proc: str = "", pid: int = 1) -> list[str]:
        """Lines a process writes to stdout/stderr outside logging (tracebacks
        printed by multiprocessing): behind vLLM 0.11's process prefix, else bare."""
        if self.name == "vllm-0.11":
            return [f"{_CYAN}({proc} pid={pid}){_RESET} {line}" for line in lines]
        return list(lines)

    def log(self, key: str, *args: object, when: float, proc: str = "", pid: int = 1,
            level: str = "INFO", tp: str = "") -> list[str]:
        """``record`` of ``msg(key, *args)``, under the line's own ``file:LINE``."""
        return self.record(self.msg(key, *args), when=when, where=self.entry(key).where,
                           proc=proc, pid=pid, level=level, tp=tp)


def _load(path: Path) -> Dialect:
    data = json.loads(path.read_text("utf-8"))
    lines = {k: Entry(v["text"], v["source"]) for k, v in data["lines"].items()}
    return Dialect(data["dialect"], data["engine"], data["version"], lines)


def for_engine(kind: str, chosen: str = DEFAULT) -> Dialect:
    """The dialect an engine of ``kind`` speaks: the chosen one (``[simulator]
    dialect``, ``sim --dialect``, a scenario's) when it is that engine's, else
    that engine's default (SGLang sglang-0.5, vLLM :data:`DEFAULT`)."""
    if kind == "sglang":
        return load(chosen if chosen.startswith("sglang") else "sglang-0.5")
    return load(chosen if chosen.startswith("vllm") else DEFAULT)


@cache
def load(name: str = DEFAULT) -> Dialect:
    """The dialect ``name`` (one of ``NAMES``)."""
    if name not in NAMES:
        raise DialectError(f"unknown dialect {name!r} (known: {', '.join(NAMES)})")
    return _load(HERE / f"{name}.json")
