"""The per-tick node probe: the one compound shell script the poller sends to
each node, and the pure parser of its output.

The script uses only the remote shell vocabulary of docs/CONTRACTS.md. Each
section starts with ``echo @@name`` and ends with ``echo "@@rc $?"`` so the
parser can tell "the file is absent" (an old kernel without PSI, no docker)
from "the output is garbled". The parser never raises: whatever it cannot
read becomes a line in ``ProbeResult.problems``.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TypeVar

from sparktui.core.config import NodeConfig
from sparktui.core.state import (
    ContainerInfo,
    DiskFree,
    ImageInfo,
    LoadAvg,
    MemInfo,
    Mount,
    PathKind,
    ProbeResult,
    ProbeTier,
    Psi,
    PsiLine,
)

PROBE_TAG = ": sparktui-probe"
"""First line of the script, so the probe is recognisable in a node's process list."""

FAST_SECTIONS = ("meminfo", "psi", "loadavg", "uptime")
"""Read every tick with shell builtins only: nothing is forked on the node."""
SLOW_SECTIONS = ("kernel", "mounts", "hfcache", "df", "containers", "images")
"""Commands (uname, cat, stat, df, docker): run every few ticks and after a
workflow step, as their own script, so a stalled ``docker`` is not taken for
a starved node."""
SECTIONS = FAST_SECTIONS + SLOW_SECTIONS
OPTIONAL_SECTIONS = frozenset({"hfcache"})
"""Sections the script leaves out when the node config does not ask for them."""
PARTIAL_SECTIONS = frozenset({"df"})
"""Sections whose rows are still good when the command failed on one argument
(``df`` exits 1 when the NAS mountpoint is missing but still reports ``/``)."""
END = "end"
T = TypeVar("T")


COPY_LOOP = "while IFS= read -r l; do printf '%s\\n' \"$l\"; done"
"""Copy stdin to stdout line by line with sh builtins only (``read``,
``printf``): a ``cat`` that starts no process."""


def builtin_cat(path: str) -> str:
    """Print the text file ``path`` with :data:`COPY_LOOP`. A missing file
    fails like ``cat`` would (the shell's "cannot open" message on stdout,
    status 2)."""
    return f"{COPY_LOOP} 2>&1 <{shlex.quote(path)}"


def builtin_cat_word(word: str) -> str:
    """Print a file the remote shell names (``word``: a shell word the caller
    made safe, quoted or built of validated parts and ``"$VAR"``s) with
    :data:`COPY_LOOP`; a file gone prints nothing (status 2)."""
    return f"{COPY_LOOP} 2>/dev/null <{word}"


def probe_script(node: NodeConfig, sections: tuple[str, ...] = SECTIONS) -> str:
    """The probe for ``node`` reading ``sections`` (FAST_SECTIONS for the
    fork-free tick, SLOW_SECTIONS for the commands); every configured path is
    shell-quoted."""
    q = shlex.quote
    commands: dict[str, str] = {
        "meminfo": builtin_cat("/proc/meminfo"),
        "psi": builtin_cat("/proc/pressure/memory"),
        "loadavg": builtin_cat("/proc/loadavg"),
        "uptime": builtin_cat("/proc/uptime"),
        "kernel": "uname -r 2>&1",
        "mounts": "cat /proc/mounts 2>&1",
        "hfcache": f"stat -c '%F|%N' {q(node.hf_cache)} 2>&1" if node.hf_cache else "",
        "df": f"df -Pk / {q(node.nas_mount)} 2>&1",
        "containers": "docker ps -a --no-trunc --format '{{json .}}' 2>&1",
        "images": "docker images --format '{{json .}}' 2>&1",
    }
    lines = [PROBE_TAG]
    for name in sections:
        if commands[name]:
            lines.append(f'echo @@{name}; {commands[name]}; echo "@@rc $?"')
    lines.append(f"echo @@{END}")
    return "\n".join(lines) + "\n"


@dataclass
class _Section:
    lines: list[str] = field(default_factory=list)
    rc: int | None = None

    def reason(self) -> str:
        """The first output line, which is the error message when the command failed."""
        first = next((ln.strip() for ln in self.lines if ln.strip()), "")
        return first[:200] or "no output"


def _split_sections(text: str) -> tuple[dict[str, _Section], bool]:
    sections: dict[str, _Section] = {}
    current: _Section | None = None
    ended = False
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if line.startswith("@@"):
            token = line[2:].strip()
            if token in SECTIONS:
                current = sections.setdefault(token, _Section())
                continue
            if token == END:
                ended = True
                current = None
                continue
            if token.startswith("rc ") and current is not None:
                value = token[3:].strip()
                current.rc = int(value) if re.fullmatch("[0-9]{1,6}", value) else -1
                continue
        if current is not None:
            current.lines.append(line)
    return sections, ended


# -- one parser per section; each returns (value, problem-or-empty) ----------

_MEMINFO_LINE = re.compile(r"^([A-Za-z0-9_()]+):\s+(\d+)(?:\s+kB)?\s*$", re.ASCII)


def _parse_meminfo(lines: list[str]) -> tuple[MemInfo | None, str]:
    values: dict[str, int] = {}
    for line in lines:
        m = _MEMINFO_LINE.match(line)
        if m:
            values[m.group(1)] = int(m.group(2))
    if "MemTotal" not in values or "MemAvailable" not in values:
        return None, "no MemTotal/MemAvailable"
    return (
        MemInfo(
            total_kib=values["MemTotal"],
            available_kib=values["MemAvailable"],
            free_kib=values.get("MemFree"),
            swap_total_kib=values.get("SwapTotal"),
            swap_free_kib=values.get("SwapFree"),
        ),
        "",
    )


_NUM = r"(\d+(?:\.\d+)?)"
_PSI_LINE = re.compile(
    rf"^(some|full)\s+avg10={_NUM}\s+avg60={_NUM}\s+avg300={_NUM}\s+total=(\d+)\s*$", re.ASCII
)


def _parse_psi(lines: list[str]) -> tuple[Psi | None, str]:
    found: dict[str, PsiLine] = {}
    for line in lines:
        m = _PSI_LINE.match(line.strip())
        if m:
            found[m.group(1)] = PsiLine(
                float(m.group(2)), float(m.group(3)), float(m.group(4)), int(m.group(5))
            )
    if "some" not in found:
        return None, "no 'some' line"
    return Psi(some=found["some"], full=found.get("full")), ""


_LOADAVG = re.compile(rf"^{_NUM}\s+{_NUM}\s+{_NUM}(?:\s+(\d+)/(\d+))?", re.ASCII)


def _parse_loadavg(lines: list[str]) -> tuple[LoadAvg | None, str]:
    m = _LOADAVG.match(lines[0].strip()) if lines else None
    if not m:
        return None, "unreadable"
    running = int(m.group(4)) if m.group(4) else None
    entities = int(m.group(5)) if m.group(5) else None
    return LoadAvg(float(m.group(1)), float(m.group(2)), float(m.group(3)), running, entities), ""


def _parse_uptime(lines: list[str]) -> tuple[float | None, str]:
    m = re.match(_NUM, lines[0].strip(), re.ASCII) if lines else None
    if not m:
        return None, "unreadable"
    return float(m.group(1)), ""


def _parse_kernel(lines: list[str]) -> tuple[str | None, str]:
    release = lines[0].strip() if lines else ""
    if not release or " " in release:
        return None, "unreadable"
    return release, ""


_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})", re.ASCII)


def _unescape_mount_field(text: str) -> str:
    return _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), text)


def _parse_mounts(lines: list[str]) -> tuple[tuple[Mount, ...], str]:
    mounts: list[Mount] = []
    bad = 0
    for line in lines:
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 6:
            bad += 1
            continue
        device, mountpoint, fstype, options = (_unescape_mount_field(f) for f in fields[:4])
        mounts.append(Mount(device, mountpoint, fstype, options))
    return tuple(mounts), (f"{bad} unreadable line(s)" if bad else "")


_STAT_MISSING = re.compile(r"^stat: cannot stat\w* '(.*)': No such file or directory", re.ASCII)


def _parse_hfcache(lines: list[str]) -> tuple[PathKind | None, str]:
    line = lines[0].strip() if lines else ""
    missing = _STAT_MISSING.match(line)
    if missing:
        return PathKind(path=missing.group(1), kind="missing"), ""
    kind, sep, quoted = line.partition("|")
    if not sep:
        return None, f"unreadable: {line[:200]}"
    try:
        words = shlex.split(quoted)
    except ValueError:
        return None, f"unreadable: {line[:200]}"
    if len(words) == 1:
        return PathKind(path=words[0], kind=kind), ""
    if len(words) == 3 and words[1] == "->":
        return PathKind(path=words[0], kind=kind, target=words[2]), ""
    return None, f"unreadable: {line[:200]}"


_DF_ROW = re.compile(r"^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(?:\d+%|-)\s+(.+)$", re.ASCII)


def _parse_df(lines: list[str]) -> tuple[tuple[DiskFree, ...], str]:
    disks: list[DiskFree] = []
    errors: list[str] = []
    for line in lines:
        if not line.strip() or line.startswith("Filesystem"):
            continue
        m = _DF_ROW.match(line)
        if m:
            disks.append(
                DiskFree(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5))
            )
        else:
            errors.append(line.strip()[:200])
    return tuple(disks), "; ".join(errors)


def _docker_json_lines(lines: list[str]) -> tuple[list[dict[str, object]], int]:
    objects: list[dict[str, object]] = []
    bad = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if isinstance(obj, dict):
            objects.append(obj)
        else:
            bad += 1
    return objects, bad


def _text(obj: dict[str, object], key: str) -> str:
    value = obj.get(key, "")
    return value if isinstance(value, str) else ""


def _parse_labels(text: str) -> MappingProxyType[str, str]:
    """docker ps joins labels as ``k=v,k2=v2`` (a value holding a comma is ambiguous)."""
    labels: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if sep and key:
            labels[key] = value
    return MappingProxyType(labels)


_UNIT_S = {
    "second": 1,
    "minute": 60,
    "hour": 3600,
    "day": 86400,
    "week": 7 * 86400,
    "month": 30 * 86400,
    "year": 365 * 86400,
}
_UP_FOR = re.compile(r"^Up (Less than a second|About an? (minute|hour)|(\d+) (\w+?)s?)\b", re.ASCII)


def parse_up_for(status: str) -> float | None:
    """Seconds a container has been up, from docker's ``Status`` (go-units
    HumanDuration: ``Up 5 minutes``, ``Up About an hour``, ``Up 2 hours (healthy)``)."""
    m = _UP_FOR.match(status)
    if not m:
        return None
    if m.group(1) == "Less than a second":
        return 0.0
    if m.group(2):
        return float(_UNIT_S[m.group(2)])
    unit = _UNIT_S.get(m.group(4))
    return float(int(m.group(3)) * unit) if unit is not None else None


def _parse_containers(lines: list[str]) -> tuple[tuple[ContainerInfo, ...], str]:
    objects, bad = _docker_json_lines(lines)
    containers = tuple(
        ContainerInfo(
            name=_text(o, "Names"),
            image=_text(o, "Image"),
            state=_text(o, "State"),
            status=_text(o, "Status"),
            labels=_parse_labels(_text(o, "Labels")),
            created=_text(o, "CreatedAt"),
            id=_text(o, "ID"),
            up_for_s=parse_up_for(_text(o, "Status")),
        )
        for o in objects
    )
    return containers, (f"{bad} unreadable line(s)" if bad else "")


def _parse_images(lines: list[str]) -> tuple[tuple[ImageInfo, ...], str]:
    objects, bad = _docker_json_lines(lines)
    images = tuple(
        ImageInfo(_text(o, "Repository"), _text(o, "Tag"), _text(o, "ID"), _text(o, "Size"))
        for o in objects
    )
    return images, (f"{bad} unreadable line(s)" if bad else "")


_NOT_READ = _Section()
"""A section the probe did not ask for (the other tier): no value, no problem."""


def _read(
    sections: dict[str, _Section],
    name: str,
    parser: Callable[[list[str]], tuple[T, str]],
    problems: list[str],
) -> T | None:
    """Parse one section, or record why it could not be read."""
    section = sections.get(name)
    if section is _NOT_READ:
        return None
    if section is None:
        if name not in OPTIONAL_SECTIONS:
            problems.append(f"{name}: section missing")
        return None
    if section.rc not in (0, None) and name not in PARTIAL_SECTIONS:
        problems.append(f"{name}: exit {section.rc}: {section.reason()}")
        return None
    value, problem = parser(section.lines)
    if problem:
        problems.append(f"{name}: {problem}")
    return value


def parse_section(name: str, text: str) -> ProbeResult:
    """One section's output (``docker ps``, ``/proc/meminfo`` ... read on its
    own, outside the probe) parsed as the probe's section ``name``."""
    return parse_probe(f"@@{name}\n{text}\n@@rc 0\n@@{END}\n", (name,))


def parse_probe(text: str, expected: tuple[str, ...] = SECTIONS) -> ProbeResult:
    """Parse the output of `probe_script`. Never raises; see ``problems``
    (a section of ``expected`` that is missing is one)."""
    sections, ended = _split_sections(text)
    problems: list[str] = []
    if not ended:
        problems.append("output ended before @@end (truncated)")
    for name in SECTIONS:
        if name not in expected and name not in sections:
            sections[name] = _NOT_READ
    meminfo = _read(sections, "meminfo", _parse_meminfo, problems)
    psi = _read(sections, "psi", _parse_psi, problems)
    loadavg = _read(sections, "loadavg", _parse_loadavg, problems)
    uptime_s = _read(sections, "uptime", _parse_uptime, problems)
    kernel = _read(sections, "kernel", _parse_kernel, problems)
    mounts = _read(sections, "mounts", _parse_mounts, problems)
    hf_cache = _read(sections, "hfcache", _parse_hfcache, problems)
    disks = _read(sections, "df", _parse_df, problems)
    containers = _read(sections, "containers", _parse_containers, problems)
    images = _read(sections, "images", _parse_images, problems)
    return ProbeResult(
        meminfo=meminfo,
        psi=psi,
        loadavg=loadavg,
        uptime_s=uptime_s,
        kernel=kernel,
        mounts=mounts or (),
        hf_cache=hf_cache,
        disks=disks or (),
        containers=containers or (),
        images=images,
        docker_ok=containers is not None,
        problems=tuple(problems),
        tier=ProbeTier.FULL if set(SLOW_SECTIONS) & set(expected) else ProbeTier.FAST,
    )


def with_slow(fast: ProbeResult, slow: ProbeResult | None, *, fresh: bool,
              problem: str = "") -> ProbeResult:
    """A fast-tier result completed with the slow tier's fields from ``slow``
    (read on this tick when ``fresh``, else carried over from an earlier one);
    ``problem`` says why the slow tier could not be read this time."""
    slow_problems = tuple(p for p in (slow.problems if slow else ())
                          if p.split(":", 1)[0] in SLOW_SECTIONS)
    extra = (f"slow tier: {problem}",) if problem else ()
    if slow is None:
        return replace(fast, problems=fast.problems + extra, slow_error=problem,
                       tier=ProbeTier.FULL if fresh else ProbeTier.FAST)
    return replace(
        fast,
        kernel=slow.kernel,
        mounts=slow.mounts,
        hf_cache=slow.hf_cache,
        disks=slow.disks,
        containers=slow.containers,
        images=slow.images,
        docker_ok=slow.docker_ok,
        problems=fast.problems + slow_problems + extra,
        slow_error=problem,
        tier=ProbeTier.FULL if fresh else ProbeTier.FAST,
    )
