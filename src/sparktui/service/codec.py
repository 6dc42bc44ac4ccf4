"""The service events as JSON values (the night's recording, the sentinel's
stream): a dataclass is an object with a ``"$"`` naming its class, so the
reader gets the very objects the writer had.

What is read back is untrusted (a recording is a file anyone may hand to
``sparktui replay``; a socket line comes from another process): `decode`
checks every value against its dataclass field's type (str, int, float,
bool, enum, optional, tuple, list, mapping, a nested dataclass, a subclass
where the field names its base), refuses numbers that are not finite or are
past `MAX_NUMBER`, and nesting past `MAX_DEPTH`. What does not fit raises
`SchemaError` (a ValueError) naming the class and field. The checks are
built once per class (a converter per field), so a decode costs about what
the old unchecked walk did, less.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections import deque
from collections.abc import Callable
from enum import Enum
from types import ModuleType, UnionType
from typing import Any

from sparktui.core import state as _state
from sparktui.core import thrash as _thrash
from sparktui.ops import events as _ops_events
from sparktui.service import events as _events
from sparktui.service import lanes as _lanes
from sparktui.watch import follower as _follower
from sparktui.watch import readiness as _readiness

MAX_DEPTH = 24
"""Levels of nesting a recorded value may have (an event is about 6 deep)."""
MAX_NUMBER = 1e15
"""A recorded float past this (or an int past 2**63) is no measurement."""
_MAX_INT = 1 << 63


class SchemaError(ValueError):
    """A recorded value that does not fit its field."""


def _registry(*modules: ModuleType) -> dict[str, type]:
    out: dict[str, type] = {}
    for m in modules:
        for value in vars(m).values():
            if isinstance(value, type) and dataclasses.is_dataclass(value) \
                    and value.__module__ == m.__name__:
                out[value.__name__] = value
    return out


def _reachable(classes: dict[str, type], roots: tuple[type, ...]) -> dict[str, type]:
    """``classes`` and every dataclass the roots' fields name, transitively
    (a lane's load progress, a wait result's failure)."""
    out = dict(classes)
    todo = list(roots)
    seen: set[type] = set()
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        out.setdefault(cls.__name__, cls)
        for hint in typing.get_type_hints(cls).values():
            stack = [hint]
            while stack:
                h = stack.pop()
                stack.extend(typing.get_args(h))
                if isinstance(h, type) and dataclasses.is_dataclass(h):
                    todo.append(h)
        todo.extend(c for c in out.values() if issubclass(c, cls) and c not in seen)
    return out


EVENTS: tuple[type, ...] = typing.get_args(_events.ServiceEvent)
"""What a recorded event may be (a state or a log line alone is no event)."""
CLASSES = _reachable(
    _registry(_state, _thrash, _events, _lanes, _follower, _readiness, _ops_events), EVENTS)
"""Every dataclass a service event can hold, by name."""


def encode(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {"$": type(obj).__name__}
        for f in dataclasses.fields(obj):
            out[f.name] = encode(getattr(obj, f.name))
        return out
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, list | tuple):
        return [encode(x) for x in obj]
    if isinstance(obj, typing.Mapping):
        return {str(k): encode(v) for k, v in obj.items()}
    return obj


def decode(data: Any, hint: Any = None) -> Any:
    """``data`` as ``hint`` (a dataclass named by its ``"$"`` when no hint is
    given); `SchemaError` when it does not fit."""
    try:
        return (_any if hint is None else _converter(hint))(data, 0)
    except RecursionError as exc:
        raise SchemaError("nested too deep") from exc


Conv = Callable[[Any, int], Any]
_CONVERTERS: dict[Any, Conv] = {}
_FIELDS: dict[type, tuple[tuple[str, Conv, Any], ...]] = {}


def _fail(want: str, data: Any) -> SchemaError:
    return SchemaError(f"{type(data).__name__} where {want} belongs")


def _str(data: Any, depth: int) -> str:
    if type(data) is not str:
        raise _fail("a string", data)
    return data


def _bool(data: Any, depth: int) -> bool:
    if type(data) is not bool:
        raise _fail("true/false", data)
    return data


def _int(data: Any, depth: int) -> int:
    if type(data) is not int or not -_MAX_INT < data < _MAX_INT:
        raise _fail("an integer", data)
    return data


def _float(data: Any, depth: int) -> float:
    kind = type(data)
    if kind is float:
        if not -MAX_NUMBER <= data <= MAX_NUMBER:  # NaN fails both
            raise SchemaError(f"{data!r} is not a finite measurement")
        return data
    if kind is int and -_MAX_INT < data < _MAX_INT:
        return float(data)
    raise _fail("a number", data)


def _none(data: Any, depth: int) -> None:
    if data is not None:
        raise _fail("null", data)


def _any(data: Any, depth: int) -> Any:
    """A value of a field typed ``object``: any JSON, bounded; a ``"$"`` object
    is its dataclass."""
    if depth > MAX_DEPTH:
        raise SchemaError("nested too deep")
    if isinstance(data, dict):
        if "$" in data:
            return _some_class(data, depth)
        return {k: _any(v, depth + 1) for k, v in data.items()}
    if isinstance(data, list):
        return [_any(v, depth + 1) for v in data]
    if isinstance(data, float) and not math.isfinite(data):
        raise SchemaError(f"{data!r} is not a finite measurement")
    return data


def _dataclass(base: type | None) -> Conv:
    def conv(data: Any, depth: int) -> Any:
        if type(data) is not dict:
            raise _fail(f"a {base.__name__ if base else 'recorded'} object", data)
        if depth > MAX_DEPTH:
            raise SchemaError("nested too deep")
        name = data.get("$")
        cls = CLASSES.get(name) if type(name) is str else None
        if cls is None:
            raise SchemaError(f"unknown class {name!r}")
        if base is not None and cls is not base and not issubclass(cls, base):
            raise SchemaError(f"{name} where {base.__name__} belongs")
        fields = _FIELDS.get(cls) or _fields(cls)
        kwargs: dict[str, Any] = {}
        try:
            for fname, fconv, missing in fields:
                if fname in data:
                    kwargs[fname] = fconv(data[fname], depth + 1)
                elif missing is _REQUIRED:
                    raise SchemaError("missing")
                elif missing is not _BY_INIT:
                    kwargs[fname] = missing()
        except SchemaError as exc:
            raise SchemaError(f"{name}.{fname}: {exc}") from None
        if cls in _BY_CONSTRUCTOR:
            try:
                return cls(**{k: v for k, v in kwargs.items() if k in _INIT_NAMES[cls]})
            except (TypeError, ValueError) as exc:
                raise SchemaError(f"{name}: {exc}") from None
        obj: Any = object.__new__(cls)  # what a dataclass __init__ does, without its
        obj.__dict__.update(kwargs)  # per-field object.__setattr__ (a frozen one's)
        return obj
    return conv


_some_class = _dataclass(None)


_REQUIRED = object()
_BY_INIT = object()
_BY_CONSTRUCTOR: set[type] = set()
"""Classes built through their constructor (a __post_init__, slots, a field
the constructor sets)."""
_INIT_NAMES: dict[type, frozenset[str]] = {}
Missing = Any
"""A missing field: its default's maker, _REQUIRED or _BY_INIT."""


def _fields(cls: type) -> tuple[tuple[str, Conv, Missing], ...]:
    """Per field: its name, its converter and what a missing one is (its
    default's maker, required, or left to the constructor)."""
    hints = typing.get_type_hints(cls)
    by_constructor = hasattr(cls, "__post_init__") or "__slots__" in vars(cls) \
        or not all(f.init for f in dataclasses.fields(cls))
    if by_constructor:
        _BY_CONSTRUCTOR.add(cls)
        _INIT_NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls) if f.init)
    out = []
    for f in dataclasses.fields(cls):
        missing: Missing
        if by_constructor:
            missing = _BY_INIT
        elif f.default is not dataclasses.MISSING:
            missing = (lambda v: lambda: v)(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            missing = f.default_factory
        else:
            missing = _REQUIRED
        if f.init:
            out.append((f.name, _converter(hints[f.name]), missing))
    _FIELDS[cls] = tuple(out)
    return _FIELDS[cls]


def _converter(hint: Any) -> Conv:
    conv = _CONVERTERS.get(hint)
    if conv is None:
        conv = _CONVERTERS[hint] = _build(hint)
    return conv


def _build(hint: Any) -> Conv:
    simple: dict[Any, Conv] = {str: _str, bool: _bool, int: _int, float: _float,
                               type(None): _none, object: _any, Any: _any}
    if hint in simple:
        return simple[hint]
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _enum(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _dataclass(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, UnionType):
        return _union(args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _sequence(_converter(args[0]), tuple)
        return _fixed_tuple(tuple(_converter(a) for a in args))
    if origin is list and args:
        return _sequence(_converter(args[0]), list)
    if origin is deque and args:
        return _sequence(_converter(args[0]), deque)
    if origin in (dict, typing.get_origin(typing.Mapping[str, str])) and len(args) == 2:
        return _mapping(_key(args[0]), _converter(args[1]))
    raise TypeError(f"no recorded form for {hint!r}")


def _enum(cls: type[Enum]) -> Conv:
    def conv(data: Any, depth: int) -> Enum:
        try:
            return cls(data)
        except (ValueError, TypeError):
            raise SchemaError(f"{data!r} is not a {cls.__name__}") from None
    return conv


def _union(args: tuple[Any, ...]) -> Conv:
    options = [_converter(a) for a in args if a is not type(None)]
    nullable = len(options) < len(args)
    if nullable and len(options) == 1:
        only = options[0]
        return lambda data, depth: None if data is None else only(data, depth)

    def conv(data: Any, depth: int) -> Any:
        if data is None and nullable:
            return None
        for option in options:
            try:
                return option(data, depth)
            except SchemaError:
                continue
        raise _fail(" or ".join(str(a) for a in args), data)
    return conv


def _sequence(item: Conv, kind: Callable[[Any], Any]) -> Conv:
    def conv(data: Any, depth: int) -> Any:
        if type(data) is not list:
            raise _fail("a list", data)
        if depth > MAX_DEPTH:
            raise SchemaError("nested too deep")
        return kind([item(x, depth + 1) for x in data])
    return conv


def _fixed_tuple(items: tuple[Conv, ...]) -> Conv:
    def conv(data: Any, depth: int) -> tuple[Any, ...]:
        if type(data) is not list or len(data) != len(items):
            raise _fail(f"a list of {len(items)}", data)
        return tuple(c(x, depth + 1) for c, x in zip(items, data, strict=True))
    return conv


def _key(hint: Any) -> Callable[[str], Any]:
    """JSON keys are strings; an int or enum key is read back as one."""
    if hint is int:
        return int
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint
    return str


def _mapping(key: Callable[[str], Any], value: Conv) -> Conv:
    def conv(data: Any, depth: int) -> dict[Any, Any]:
        if type(data) is not dict:
            raise _fail("an object", data)
        if depth > MAX_DEPTH:
            raise SchemaError("nested too deep")
        try:
            return {key(k): value(v, depth + 1) for k, v in data.items()}
        except (ValueError, TypeError) as exc:
            if isinstance(exc, SchemaError):
                raise
            raise SchemaError(f"a key that is not a {getattr(key, '__name__', key)}") from None
    return conv
