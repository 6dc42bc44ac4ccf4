"""Strict TOML → frozen dataclass conversion that reports every problem with
its file, line and dotted key.

tomllib gives values but no positions, so `KeyLines` scans the text once to
map dotted key paths to the line they are written on. The validator walks a
dataclass's fields: unknown keys are rejected with the closest known key
suggested, required keys must be present, and values must have the declared
type (`str`, `int`, `float`, `bool`, `tuple[str, ...]`, `dict[str, str]`,
`X | None`, nested dataclasses).

Every number also has a *domain*, declared where the field is declared with
``Annotated[float, Range(...)]`` (the aliases below): non-finite numbers
(TOML allows ``nan`` and ``inf``) are refused everywhere, and a value outside
its range is reported with the allowed range. The same domains check CLI
flags (`flag`) and values written by ``sparktui record``.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import re
import tomllib
import types
import typing
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from .errors import InputError, Problem

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Range:
    """The allowed values of a number: ``lo``/``hi`` bounds (None: unbounded),
    each inclusive unless ``lo_open``/``hi_open``; ``unit`` for the message;
    ``off``: one value outside the bounds that turns the feature off (``0``)."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    unit: str = ""
    off: float | None = None

    def describe(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        lo = None if self.lo is None else f"{'>' if self.lo_open else '>='} {_num(self.lo)}"
        hi = None if self.hi is None else f"{'<' if self.hi_open else '<='} {_num(self.hi)}"
        text = " and ".join(p for p in (lo, hi) if p) + unit
        return text if self.off is None else f"{_num(self.off)} (off) or {text}"

    def check(self, value: float) -> str | None:
        """Why `value` is outside the domain, or None. An int of any size is
        compared as it is (never converted to a float: 400 digits overflow)."""
        if isinstance(value, float) and not math.isfinite(value):
            return f"must be a finite number ({self.describe()}), got {value}"
        if self.off is not None and value == self.off:
            return None
        low = self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo)
        high = self.hi is not None and (value >= self.hi if self.hi_open else value > self.hi)
        if low or high:
            return f"{_shown(value)} is out of range: must be {self.describe()}"
        return None


def _shown(value: float) -> str:
    """A value as an error message quotes it: an int of hundreds of digits cut short."""
    if isinstance(value, int):
        digits = str(abs(value))
        sign = "-" if value < 0 else ""
        return f"{sign}{digits}" if len(digits) <= 20 else \
            f"{sign}{digits[:12]}... ({len(digits)} digits)"
    return f"{value:g}"


def _num(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() and abs(x) >= 100_000 else f"{x:g}"


FINITE = Range()
Port = Annotated[int, Range(1, 65535)]
Count = Annotated[int, Range(0, 1_000_000)]
Seconds = Annotated[float, Range(1, 86_400, unit="s")]
"""A duration of a second to a day (a boot, a shutdown, a stall window: shorter
ones mean nothing)."""
GiB = Annotated[float, Range(0, 1024, lo_open=True, unit="GiB")]
"""A positive amount of one node's memory."""
GiBOrZero = Annotated[float, Range(0, 1024, unit="GiB")]
Fraction = Annotated[float, Range(0, 1)]
Percent = Annotated[float, Range(0, 100, unit="%")]


def domain_of(tp: Any) -> tuple[Any, Range | None]:
    """The base type and Range of an ``Annotated`` hint (or the hint itself).
    A bare ``float`` still has a domain: finite."""
    if get_origin(tp) is Annotated:
        base, *meta = get_args(tp)
        return base, next((m for m in meta if isinstance(m, Range)), None)
    return tp, FINITE if tp is float else None


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """The resolved type hints of dataclass `cls` (its annotations are strings:
    resolving them is most of a config load's time), once per class. Callers
    only read the dict."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls, include_extras=True)
    return hints


def flag(cls: type, name: str) -> Any:
    """An argparse ``type=`` that parses a number and checks it against the
    domain of field `name` of dataclass `cls` (one truth with the config file)."""
    base, rng = domain_of(_hints(cls)[name])
    return number(base, rng or FINITE)


def number(base: type, rng: Range) -> Any:
    """An argparse ``type=`` for a number flag of its own: `base` (int or float)
    within `rng` (never non-finite)."""

    def parse(text: str) -> Any:
        try:
            value = base(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if (why := rng.check(value)) is not None:
            raise argparse.ArgumentTypeError(why)
        return value

    return parse


_HEADER = re.compile(r"^\s*\[\[?\s*(?P<name>[^\]]+?)\s*\]\]?\s*(#.*)?$")
_BARE_OR_QUOTED = r"(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_\-]+)"
_KEY = re.compile(rf"^\s*(?P<key>{_BARE_OR_QUOTED}(\s*\.\s*{_BARE_OR_QUOTED})*)\s*=")
_PART = re.compile(r"\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_\-]+)")


def _split_dotted(text: str) -> tuple[str, ...]:
    return tuple(m.group(1) or m.group(2) or m.group(3) or "" for m in _PART.finditer(text))


class KeyLines:
    """Where each table header and key of a TOML document is written (1-based)."""

    def __init__(self, text: str) -> None:
        self._lines: dict[tuple[str, ...], int] = {}
        table: tuple[str, ...] = ()
        in_multiline: str | None = None
        for number, line in enumerate(text.splitlines(), start=1):
            if in_multiline is not None:
                if in_multiline in line:
                    in_multiline = None
                continue
            header = _HEADER.match(line)
            if header and not line.lstrip().startswith("#"):
                table = _split_dotted(header.group("name"))
                self._lines.setdefault(table, number)
                continue
            key = _KEY.match(line)
            if key:
                path = table + _split_dotted(key.group("key"))
                self._lines.setdefault(path, number)
                rest = line[key.end():]
                for quote in ('"""', "'''"):
                    if rest.count(quote) == 1:
                        in_multiline = quote

    def line(self, path: tuple[str, ...]) -> int | None:
        """The line of `path`, or of its nearest enclosing table."""
        while path:
            if path in self._lines:
                return self._lines[path]
            path = path[:-1]
        return None


@dataclasses.dataclass
class Source:
    """A parsed TOML file with the means to report problems in it."""

    file: Path
    data: dict[str, Any]
    lines: KeyLines
    problems: list[Problem] = dataclasses.field(default_factory=list)

    @classmethod
    def read(cls, file: Path) -> Source:
        try:
            text = read_text(file)
        except InputError as exc:
            src = cls(file, {}, KeyLines(""))
            src.problems.extend(exc.problems)
            return src
        return cls.parse(file, text)

    @classmethod
    def parse(cls, file: Path, text: str) -> Source:
        """`text` as if read from `file` (problems name `file`)."""
        try:
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError) as exc:
            match = re.search(r"line (\d+)", str(exc))
            src = cls(file, {}, KeyLines(""))
            src.problems.append(
                Problem(file, int(match.group(1)) if match else None, "(syntax)", str(exc))
            )
            return src
        except ValueError:  # an integer past Python's 4300-digit conversion limit
            long = re.search(r"\d{1000,}", text)
            line = text.count("\n", 0, long.start()) + 1 if long else None
            src = cls(file, {}, KeyLines(""))
            src.problems.append(Problem(file, line, "(syntax)", "a number with thousands of "
                                                                "digits is no value"))
            return src
        return cls(file, data, KeyLines(text))

    def error(self, path: tuple[str, ...], message: str) -> None:
        key = ".".join(_quote_part(p) for p in path) or "(top level)"
        self.problems.append(Problem(self.file, self.lines.line(path), key, message))


MAX_FILE_BYTES = 1_000_000
"""A config, recipe or notes file larger than this is refused (none is near it)."""


def read_text(file: Path) -> str:
    """A UTF-8 text file, or InputError naming the file and what is wrong
    (unreadable, too large, not UTF-8: with the line of the first bad byte)."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise InputError([Problem(file, None, "(file)",
                                  f"cannot read: {exc.strerror or exc}")]) from None
    if len(data) > MAX_FILE_BYTES:
        raise InputError([Problem(file, None, "(file)", f"{len(data)} bytes is too large "
                                  f"(at most {MAX_FILE_BYTES})")])
    if data.startswith(b"\xef\xbb\xbf"):
        raise InputError([Problem(file, 1, "(encoding)",
                                  "the file starts with a UTF-8 byte-order mark (BOM), which "
                                  "TOML does not allow -> save it as UTF-8 without BOM")])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InputError([Problem(file, line, "(encoding)",
                                  f"byte 0x{data[exc.start]:02x} is not UTF-8 -> save the "
                                  f"file as UTF-8")]) from None


def _quote_part(part: str) -> str:
    return part if re.fullmatch(r"[A-Za-z0-9_\-]+", part) else f'"{part}"'


def _type_name(tp: Any) -> str:
    tp = domain_of(tp)[0]
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(tp))
    if origin is tuple:
        return f"list of {_type_name(get_args(tp)[0])}"
    if origin is dict:
        return "table of strings"
    if tp is type(None):
        return "nothing"
    return {str: "string", int: "integer", float: "number", bool: "true/false"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def convert_value(src: Source, path: tuple[str, ...], value: Any, tp: Any) -> tuple[bool, Any]:
    """Check `value` against type `tp` and its domain; on failure record a
    problem and return (False, None)."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        for arg in get_args(tp):
            if arg is type(None):
                continue
            if dataclasses.is_dataclass(arg) and isinstance(arg, type) and isinstance(value, dict):
                return True, build(src, path, value, arg)
            base, _ = domain_of(arg)
            if _try(value, base)[0]:
                return convert_value(src, path, value, arg)
        src.error(path, f"expected {_type_name(tp)}, got {_describe(value)}")
        return False, None
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(value, dict):
            src.error(path, f"expected a table, got {_describe(value)}")
            return False, None
        return True, build(src, path, value, tp)
    base, rng = domain_of(tp)
    ok, converted = _try(value, base)
    if not ok:
        src.error(path, f"expected {_type_name(base)}, got {_describe(value)}")
        return False, None
    if rng is not None and (why := rng.check(converted)) is not None:
        src.error(path, why)
        return False, None
    return True, converted


def _try(value: Any, tp: Any) -> tuple[bool, Any]:
    origin = get_origin(tp)
    if origin is tuple:
        (item,) = get_args(tp)[:1]
        if not isinstance(value, list):
            return False, None
        items = []
        for v in value:
            ok, c = _try(v, item)
            if not ok:
                return False, None
            items.append(c)
        return True, tuple(items)
    if origin is dict:
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            return False, None
        return True, dict(value)
    if tp is bool:
        return isinstance(value, bool), value
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if tp is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return False, None
        try:
            return True, float(value)
        except OverflowError:  # an int past any float: the domain says it is not finite
            return True, math.inf if value > 0 else -math.inf
    if tp is str:
        return isinstance(value, str), value
    return False, None


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"true/false ({str(value).lower()})"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int):
        return f"int {_shown(value)}"
    return f"{type(value).__name__} {value!r}"


def build(src: Source, path: tuple[str, ...], table: dict[str, Any], cls: type[T],
          extra: dict[str, Any] | None = None, skip: frozenset[str] = frozenset()) -> T | None:
    """Build dataclass `cls` from `table`, recording every problem in `src`.

    `extra` supplies fields that do not come from the table (e.g. a name taken
    from the table's key); `skip` names table keys the caller handles itself.
    Returns None when a required field is missing or invalid.
    """
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    given = dict(extra or {})
    known = set(fields) - set(given)
    ok = True
    for key, value in table.items():
        if key in skip:
            continue
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known | skip), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            src.error(path + (key,), f"unknown key{hint}")
            continue
        good, converted = convert_value(src, path + (key,), value, hints[key])
        if good:
            given[key] = converted
        else:
            ok = False
    for name, f in fields.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and name not in given and name not in table:
            src.error(path + (name,), "required key is missing")
            ok = False
    if not ok:
        return None
    return cls(**given)
