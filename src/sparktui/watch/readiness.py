"""Readiness: what a lane is, how its ranks are found, and whether the
server answering its port is *this* lane's.

A lane is *ready* (watch/lane.py runs the stages) when its endpoint passes
every stage in order: port open -> ``/health`` 200 -> ``/v1/models`` names
the lane's served model and the server proves to be this lane's -> (optionally)
one short streaming completion returns a first token. Probing begins only
once the lane's own log reached the API phase, so a server already on the
port (a stale one, another lane's) is never taken for this boot.

Identity, for vLLM and SGLang alike: the ``/v1/models`` request carries a
one-off query tag, and uvicorn's access log (on by default in both engines)
writes that request line into the log of the container that answered: when
the tag shows up in this lane's rank-0 log, the server is this lane's. When
the access log is off, ``process_start_time_seconds`` on ``/metrics`` later
than the rank-0 container's start proves it instead. A server listing another
model, or a port held by another lane's running container, is a failure:
"port answered by lane X".
"""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from sparktui.core.errors import RemoteError
from sparktui.core.failure import Failure
from sparktui.core.logsig import Phase, parse_timestamp
from sparktui.core.probe import parse_section
from sparktui.core.state import ContainerInfo
from sparktui.watch.follower import INSPECT_TIMEOUT_S, StreamSource

DOCKER_PS = "docker ps -a --no-trunc --format '{{json .}}'"
DISCOVER_TIMEOUT_S = 15.0
MEMINFO_TIMEOUT_S = 10.0
STAGES = ("port", "health", "models", "first token")


class Outcome(StrEnum):
    READY = "ready"
    FAILED = "failed"
    STALLED = "stalled"
    STOPPED = "stopped"


class NodeLink(StreamSource, Protocol):
    """What the watch needs of a node connection (adapters/ssh.NodeConnection)."""

    async def run(self, cmd: str, timeout: float) -> object: ...


@dataclass(frozen=True)
class RankContainer:
    """One rank of a lane, from its container's labels."""

    rank: int
    node: str
    container: str
    nranks: int
    port: int | None
    engine: str
    running: bool


@dataclass(frozen=True)
class WaitResult:
    lane: str
    outcome: Outcome
    stages: dict[str, float]
    """Seconds since the watch began at which each readiness stage passed."""
    phase_times: dict[Phase, float]
    failure: Failure | None
    last_progress: str
    summary: str
    ranks: dict[int, str] = field(default_factory=dict)
    """Rank -> ``running``, ``exited (N)`` or ``unknown``, read when the
    watch ended failed or stalled (what ``--keep`` or ``stop`` acts on)."""
    unread: tuple[str, ...] = ()
    """Ranks whose log could not be read to the failure's time (node silent)."""
    port_taken: str = ""
    """``port 8000 on dgx1 answered by lane X`` when another lane's running
    container holds the port on the head node (found when the lane failed)."""

    def ranks_text(self) -> str:
        running = [f"r{r}" for r, st in sorted(self.ranks.items()) if st == "running"]
        others = [f"r{r} {st}" for r, st in sorted(self.ranks.items()) if st != "running"]
        parts = []
        if running:
            parts.append(f"still running: {', '.join(running)}")
        if others:
            parts.append(", ".join(others))
        return "; ".join(parts)


def lane_ranks(node: str, containers: Sequence[ContainerInfo], lane: str) -> list[RankContainer]:
    """The rank containers of ``lane`` among one node's containers."""
    out = []
    for c in containers:
        labels = c.labels
        if labels.get("sparktui.lane") != lane:
            continue
        try:
            rank = int(labels.get("sparktui.rank", ""))
            nranks = int(labels.get("sparktui.nranks", "1"))
        except ValueError:
            continue
        port_text = labels.get("sparktui.port", "")
        port = int(port_text) if port_text.isdigit() else None
        out.append(RankContainer(rank, node, c.name, nranks, port,
                                 labels.get("sparktui.engine", ""), c.running))
    return out


async def discover_lane(links: dict[str, NodeLink], lane: str) -> list[RankContainer]:
    """Find the lane's rank containers on every node (``docker ps`` on each,
    in parallel). Nodes that do not answer are skipped."""

    async def one(node: str, link: NodeLink) -> list[RankContainer]:
        result = await link.run(f"{DOCKER_PS} 2>&1", DISCOVER_TIMEOUT_S)
        text = getattr(result, "stdout", "")
        return lane_ranks(node, parse_section("containers", text).containers, lane)

    found = await asyncio.gather(*(one(n, link) for n, link in links.items()),
                                 return_exceptions=True)
    ranks: dict[int, RankContainer] = {}
    for item in found:
        if isinstance(item, RemoteError):
            continue
        if isinstance(item, BaseException):
            raise item
        for rc in item:
            if rc.rank not in ranks or (rc.running and not ranks[rc.rank].running):
                ranks[rc.rank] = rc
    return [ranks[r] for r in sorted(ranks)]


@dataclass(frozen=True)
class ContainerFacts:
    """What ``docker inspect`` says of a rank container (for identity)."""

    running: bool
    started: float | None
    """Epoch seconds of State.StartedAt."""
    finished: str | None
    """State.FinishedAt (RFC 3339) once it exited, else None."""
    exit_code: int | None
    oom_killed: bool
    served_models: tuple[str, ...]
    """The names ``/v1/models`` will list for it (from its engine arguments)."""
    pid: int | None = None
    """The container's main process on the node (State.Pid) while it runs."""
    id: str | None = None
    """The container's full id (``Id``): its cgroup's name on the node."""


ZERO_TIME = "0001-01-01T00:00:00Z"


def served_models(args: Sequence[str]) -> tuple[str, ...]:
    """The model names an engine serves, from its argv: ``--served-model-name``
    (vLLM takes several), else vLLM's ``serve MODEL`` or SGLang's ``--model-path``."""
    args = list(args)
    for i, a in enumerate(args):
        if a == "--served-model-name":
            names = []
            for b in args[i + 1:]:
                if b.startswith("-"):
                    break
                names.append(b)
            if names:
                return tuple(names)
        elif a.startswith("--served-model-name="):
            return (a.split("=", 1)[1],)
    for i, a in enumerate(args):
        if a in ("--model-path", "--model") and i + 1 < len(args):
            return (args[i + 1],)
        if a == "serve" and i + 1 < len(args) and not args[i + 1].startswith("-"):
            return (args[i + 1],)
    return ()


async def inspect_container(link: NodeLink, container: str) -> ContainerFacts | None:
    """``docker inspect NAME``; None when it does not exist or cannot be read."""
    cmd = f"docker inspect {shlex.quote(container)} 2>/dev/null"
    try:
        result = await link.run(cmd, INSPECT_TIMEOUT_S)
        data = json.loads(getattr(result, "stdout", "") or "[]")
    except (RemoteError, ValueError):
        return None
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return None
    obj = data[0]
    state_v, config_v = obj.get("State"), obj.get("Config")
    state: dict[str, Any] = state_v if isinstance(state_v, dict) else {}
    config: dict[str, Any] = config_v if isinstance(config_v, dict) else {}
    args = config.get("Cmd") if isinstance(config.get("Cmd"), list) else obj.get("Args", [])
    finished = state.get("FinishedAt")
    code = state.get("ExitCode")
    return ContainerFacts(
        running=bool(state.get("Running")),
        started=parse_timestamp(state.get("StartedAt") if state.get("StartedAt") != ZERO_TIME
                                else None),
        finished=finished if isinstance(finished, str) and finished != ZERO_TIME
        and not state.get("Running") else None,
        exit_code=code if isinstance(code, int) else None,
        oom_killed=bool(state.get("OOMKilled")),
        served_models=served_models([str(a) for a in args or []]),
        pid=pid if isinstance(pid := state.get("Pid"), int) and pid > 0
        and state.get("Running") else None,
        id=cid if isinstance(cid := obj.get("Id"), str) and cid else None,
    )


async def port_holders(link: NodeLink, port: int, lane: str) -> list[str]:
    """Other lanes whose running container on this node claims ``port``."""
    try:
        result = await link.run(f"{DOCKER_PS} 2>&1", DISCOVER_TIMEOUT_S)
    except RemoteError:
        return []
    containers = parse_section("containers", getattr(result, "stdout", "")).containers
    return sorted({c.labels.get("sparktui.lane", c.name) for c in containers
                   if c.running and c.labels.get("sparktui.port") == str(port)
                   and c.labels.get("sparktui.lane") != lane})


def describe_stall(result: WaitResult, *, kept: str) -> str:
    """What a stalled (or failed) lane leaves behind, for the operator."""
    text = result.ranks_text()
    return f"{text}; {kept}" if text else kept
