"""The writer's index of a night's recording: a sidecar beside the night
(``night-X.jsonl.gz.idx``) that lets ``sparktui replay`` open a night without
decompressing it (issue 25: at 180 MB decompressed a night's index was mostly
zlib's time).

The `Recorder`'s writer thread appends one JSON line per gzip member it wrote
whole, after that member's write::

    {"at": <file offset>, "n": <compressed length>, "crc": <the member's CRC32>,
     "size": <its decompressed length>, "k": [<class>...], "r": [<route>...],
     "l": [<line>...]}

one entry per line of the member, in order: ``[t, k, r, n]`` for an event
(its time, class ``k[k]``, route ``r[r]`` as `recorded.route` says, and its
length without the newline), ``[t, n]`` for a line that begins a run, ``n``
for any other line (a gap line). A line's offset in the member is the sum of
the lengths (and newlines) before it.

The index is only a cache, and as untrusted as the night: `trusted_records`
gives records while each one is well formed, starts where the one before
ended (the first at 0), lies within the file, and the file holds a gzip
header at its start and, at its end, the very CRC32 and length it names;
from the first record that is not, the reader decompresses the rest of the
night (service/recorded.py). A missing, torn, stale or lying index costs
speed, never what the replay shows: a line the replay decodes must still say
what its entry said. Two processes appending to one night at once (a member
of the other between two of ours) break the chain there, and so does a torn
member a failed ``ftruncate`` left.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparktui.service.codec import EVENTS

log = logging.getLogger(__name__)

SUFFIX = ".idx"
MAX_RECORD = 16 << 20
"""A longer record is not trusted (the reader decompresses from there): what
is read at a time stays bounded."""
TAIL = 1 << 20
"""What the writer reads back of the index to know where it ends."""
_MAGIC = b"\x1f\x8b\x08"
_MIN_MEMBER = 18
"""A gzip header and trailer."""
_KINDS = {cls.__name__ for cls in EVENTS}

Meta = tuple[float] | tuple[float, str, str] | None
"""What the writer knows of a line: (t,) where a run begins, (t, class,
route) for an event, None for any other line."""
Item = int | list[Any]


def index_path(night: Path) -> Path:
    return night.with_name(night.name + SUFFIX)


def record(at: int, member: bytes, lines: Sequence[bytes], metas: Sequence[Meta]) -> bytes:
    """The index line of ``member`` (the gzip of ``lines``, each ending in a
    newline), written at file offset ``at``."""
    crc, size = struct.unpack("<II", member[-8:])
    kinds: dict[str, int] = {}
    routes: dict[str, int] = {}
    items: list[Item] = []
    for line, meta in zip(lines, metas, strict=True):
        n = len(line) - 1
        if meta is None:
            items.append(n)
        elif len(meta) == 1:
            items.append([meta[0], n])
        else:
            t, kind, key = meta
            items.append([t, kinds.setdefault(kind, len(kinds)),
                          routes.setdefault(key, len(routes)), n])
    return json.dumps({"at": at, "n": len(member), "crc": crc, "size": size, "k": list(kinds),
                       "r": list(routes), "l": items}, separators=(",", ":")).encode() + b"\n"


def last_end(fd: int) -> int | None:
    """Where the last record of the index open at ``fd`` says its member
    ends (None: no whole record last, or one longer than `TAIL`)."""
    size = os.fstat(fd).st_size
    tail = os.pread(fd, min(size, TAIL), max(size - TAIL, 0))
    line = tail[:-1].rsplit(b"\n", 1)[-1]
    if not tail.endswith(b"\n") or (len(line) == len(tail) - 1 and size > TAIL):
        return None
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    at, n = (data.get("at"), data.get("n")) if isinstance(data, dict) else (None, None)
    return at + n if type(at) is int and type(n) is int else None


@dataclass(frozen=True)
class Record:
    """One member's record, checked against the night."""

    at: int
    end: int
    kinds: list[str]
    routes: list[str]
    items: list[Item]


def trusted_records(night: Path, fd: int) -> Iterator[Record]:
    """The index's records of the night open at ``fd``, from the first, while
    each can be trusted (see the module's doc). A symlink or anything but a
    regular file at the index's name is not read."""
    size = os.fstat(fd).st_size
    try:
        idx = os.open(index_path(night), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                      | os.O_CLOEXEC)
    except OSError:
        return
    if not stat.S_ISREG(os.fstat(idx).st_mode):
        os.close(idx)
        log.debug("recording index %s: not a regular file", index_path(night))
        return
    with open(idx, "rb") as f:
        end = 0
        while end < size:
            line = f.readline(MAX_RECORD + 1)
            checked = _checked(line, end, size, fd) if line.endswith(b"\n") else None
            if checked is None:
                if line:
                    log.debug("recording index %s: not trusted from offset %d",
                              index_path(night), end)
                return
            yield checked
            end = checked.end


def _checked(line: bytes, end: int, size: int, fd: int) -> Record | None:
    """The record on ``line`` if it can be trusted as the one after ``end``."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    at, n, crc, isize = (data.get(k) for k in ("at", "n", "crc", "size"))
    kinds, routes, items = data.get("k"), data.get("r"), data.get("l")
    if not (type(at) is int and type(n) is int and type(crc) is int and type(isize) is int
            and at == end and _MIN_MEMBER <= n <= size - at and 0 <= crc < 1 << 32
            and 0 <= isize < 1 << 32 and isinstance(kinds, list) and isinstance(routes, list)
            and isinstance(items, list)
            and all(type(k) is str and k in _KINDS for k in kinds)
            and all(type(r) is str for r in routes)):
        return None
    if _length(items, len(kinds), len(routes)) != isize:
        return None
    if os.pread(fd, len(_MAGIC), at) != _MAGIC \
            or os.pread(fd, 8, at + n - 8) != struct.pack("<II", crc, isize):
        return None
    return Record(at, at + n, kinds, routes, items)


def _length(items: list[Any], kinds: int, routes: int) -> int | None:
    """The member's decompressed length the items add up to (None: an item
    that is not one)."""
    total = 0
    for item in items:
        if type(item) is list:
            if len(item) == 4:
                t, k, r, n = item
                if not (type(k) is int and 0 <= k < kinds and type(r) is int and 0 <= r < routes):
                    return None
            elif len(item) == 2:
                t, n = item
            else:
                return None
            if type(t) is not float and type(t) is not int:
                return None
        else:
            n = item
        if type(n) is not int or n < 0:
            return None
        total += n + 1
    return total
