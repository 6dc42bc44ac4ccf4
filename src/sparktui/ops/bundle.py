"""Incident bundles: ``<state_dir>/bundles/<time>-<lane-or-node>.tar.gz``.

One file holding what an operator otherwise spends an hour collecting: the
last lines of every rank (with timestamps), each node's kernel journal since
the boot began, the nodes' polls over the window, the plan and guard verdicts
that started the lane, the recipe and config with their hashes, the rendered
commands, the journal entries, the alerts, and ``SUMMARY.md`` on top
(core/incident.py decides what it says).

Every node is asked in parallel with a timeout; a node that does not answer
contributes what the console holds (``Held``) and the summary says what could
not be collected. The Home Assistant token is never inside: every part is
scrubbed of the token's value (from the environment and the token files) and
of any bearer credential before it is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import os
import re
import tarfile
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sparktui.core.clock import Clock, SystemClock
from sparktui.core.config import Config
from sparktui.core.errors import InputError, Problem
from sparktui.core.incident import (
    NODES,
    OURS,
    Clocks,
    Held,
    HeldAlert,
    Incident,
    SnapshotRow,
    TimelineItem,
    bound_members,
    build_timeline,
    dedupe_alerts,
    findings_timeline,
    first_fatal,
    incident_starts,
    kernel_findings,
    line_time,
    render_summary,
    scrub,
    snapshot_row,
    state_changes,
)
from sparktui.core.logsig import parse_timestamp
from sparktui.core.recipe import Recipe
from sparktui.core.recipe_load import load_recipe, recipe_file
from sparktui.core.render import plan
from sparktui.core.state import ClusterSnapshot
from sparktui.ops.context import NodeLink
from sparktui.ops.journal import SIMULATED, Entry, Journal, clock_of, fold
from sparktui.ops.private import open_private, private_dir
from sparktui.watch.follower import JOURNAL_MATCHES, docker_logs_command

BUNDLE_DIR = "bundles"
SUBJECT_MAX = 128
SUBJECT = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{SUBJECT_MAX - 1}}}")
"""A lane or node name as a bundle takes it (and puts in a file name)."""
DEFAULT_LINES = 500
KERNEL_LINES = 5000
COLLECT_TIMEOUT_S = 15.0
MEMBER_CAP_BYTES = 4 << 20
TOTAL_CAP_BYTES = 24 << 20
"""Uncompressed; logs compress ~10x, so a bundle stays a few MB at most."""
DEFAULT_WINDOW_S = 3600.0
"""Without ``--since`` and without a serve in the journal: the last hour."""


@dataclass
class BundleSources:
    """Where a bundle's parts come from (the CLI builds it from an OpsContext,
    the console's service from its own links)."""

    config: Config
    link: Callable[[str], NodeLink]
    journal: Journal
    clock: Clock
    state_dir: Path
    secrets: tuple[str, ...] = ()
    snapshot: Callable[[Sequence[str]], Awaitable[ClusterSnapshot]] | None = None
    """Poll these nodes once now (the CLI, which holds no history)."""
    timeout_s: float = COLLECT_TIMEOUT_S


@dataclass(frozen=True)
class BundleResult:
    path: Path
    subject: str
    incident: Incident
    size: int


def token_values(config: Config, extra_files: Iterable[str | Path] = ()) -> tuple[str, ...]:
    """Every value the Home Assistant token may have here (environment, token
    file, the simulator's token file), to scrub from a bundle. Unreadable
    files are skipped: this never fails."""
    ha = config.home_assistant
    values = [os.environ.get(ha.token_env, "").strip()] if ha.token_env else []
    for f in (ha.token_file, *extra_files):
        try:
            values.append(Path(f).expanduser().read_text().strip())
        except (OSError, UnicodeDecodeError):
            continue
    return tuple(v for v in values if v)


def kernel_command(lines: int = KERNEL_LINES) -> str:
    """The kernel journal of this boot, as the follower reads it, without -f."""
    return f"journalctl -b -o short-iso-precise --no-pager -n {int(lines)} {JOURNAL_MATCHES} 2>&1"


@dataclass(frozen=True)
class _Rank:
    rank: int
    node: str
    container: str


async def write_bundle(src: BundleSources, subject: str, *, held: Held | None = None,
                       since: float | None = None, lines: int = DEFAULT_LINES,
                       reason: str = "asked for (sparktui bundle)") -> BundleResult:
    """Collect, write and return the bundle of a lane or a node.
    Raises InputError when ``subject`` is neither."""
    config, held = src.config, held or Held()
    now = src.clock.time()
    clocks = bundle_clocks(src)
    entries = src.journal.entries()
    kind, lanes, nodes = _resolve(config, subject, entries, held)
    bundle_dir(src.state_dir)  # a state dir it cannot write to is said before collecting
    serves = [w for w in fold(entries) if w.workflow == "serve" and w.target in lanes]
    stamp = journal_stamp(src.clock, clocks)
    if since is None:  # from the serves journaled on our clock: no window across two
        ours = {e.wf for e in entries if stamp(e) == OURS}
        since = default_since([w for w in serves if w.wf in ours], held.alerts,
                              (*lanes, *nodes), now)
    recipes = {lane: _recipe(config, lane) for lane in lanes}
    ranks = {lane: _ranks(config, lane, recipes[lane], serves, held) for lane in lanes}
    if kind == "node":
        ranks = {lane: [r for r in rs if r.node == subject] for lane, rs in ranks.items()}
    for rs in ranks.values():
        nodes.extend(r.node for r in rs if r.node not in nodes)
    missing: list[str] = []
    members: dict[str, bytes] = {}
    dark: set[str] = set()

    # -- rank logs and kernel journals, every node at once ---------------------
    kept_by_serve = {(w.target, int(rank)): got for w in serves
                     for rank, got in (w.end_detail.get("last_lines") or {}).items()}

    async def rank_log(lane: str, r: _Rank) -> tuple[str, _Rank, list[str]]:
        cmd = docker_logs_command(r.container, follow=False, tail=lines)
        try:
            out = await _run(src, r.node, cmd)
            return lane, r, out.splitlines()[-lines:]
        except Exception as exc:
            if not isinstance(exc, _Refused):
                dark.add(r.node)
            kept = held.logs.get(lane, {}).get(r.rank, [])[-lines:]
            where = "the console followed before"
            if not kept:
                kept = list(kept_by_serve.get((lane, r.rank), []))
                where = "the serve kept in the journal"
            missing.append(f"rank {r.rank} of {lane} on {r.node}: its log could not be read "
                           f"({_why(exc)}); {len(kept)} line(s) {where} are included")
            return lane, r, kept

    async def kernel(node: str) -> tuple[str, list[str]]:
        try:
            out = await _run(src, node, kernel_command())
            got = out.splitlines()
            if not clocks.shared:  # `since` is on our clock: this boot's last lines, unwindowed
                return node, got
            return node, [ln for ln in got if (line_time(ln) or now) >= since]
        except Exception as exc:
            if not isinstance(exc, _Refused):
                dark.add(node)
            kept = held.kernel.get(node, [])
            missing.append(f"{node}: the kernel journal could not be read ({_why(exc)}); "
                           f"{len(kept)} line(s) the console followed before are included")
            return node, kept

    logs = await asyncio.gather(*(rank_log(lane, r) for lane, rs in ranks.items() for r in rs))
    journals = dict(await asyncio.gather(*(kernel(n) for n in nodes)))
    rank_lines: dict[int, list[str]] = {}
    for lane, r, got in logs:
        members[f"ranks/{lane}-r{r.rank}-{r.node}.log"] = _text(got)
        if len(ranks) == 1 or lane == subject:
            rank_lines[r.rank] = got
    findings = []
    for node, got in journals.items():
        members[f"kernel/{node}.log"] = _text(got)
        findings += kernel_findings(node, got)

    # -- snapshots: what the console polled, plus one poll now -----------------
    rows: dict[str, list[SnapshotRow]] = {
        n: [r for r in held.snapshots.get(n, []) if r.t >= since] for n in nodes}
    if src.snapshot is not None:
        try:
            async with asyncio.timeout(src.timeout_s + 5.0):
                snap = await src.snapshot(nodes)
            for s in snap.nodes:
                rows.setdefault(s.node, []).append(snapshot_row(s))
                if not s.online:
                    dark.add(s.node)
        except Exception as exc:
            missing.append(f"the nodes could not be polled now ({_why(exc)})")
    for node in nodes:
        if not rows.get(node):
            missing.append(f"{node}: no poll snapshot in the window")
        members[f"snapshots/{node}.jsonl"] = _jsonl(r.to_json() for r in rows.get(node, []))

    # -- plan, guards, recipe, config, commands, journal, alerts --------------
    wfs = {w.wf for w in fold(entries)
           if (w.target in (subject, *lanes) or subject in w.detail.get("nodes", ()))
           and (w.ended_at or now) >= since} | {w.wf for w in serves[-1:]}
    mine = [e for e in entries if e.wf in wfs]
    members["plan.json"] = _json(_plan(serves[-1:], mine, held, wfs))
    hashes = []
    for lane, recipe in recipes.items():
        if recipe is None:
            missing.append(f"recipe {lane}: not found in {config.recipes_dir}")
            continue
        data = recipe.path.read_bytes()
        members[f"recipe/{recipe.path.name}"] = data
        hashes.append(f"{hashlib.sha256(data).hexdigest()}  recipe/{recipe.path.name}")
    config_bytes = config.path.read_bytes()
    members[f"config/{config.path.name}"] = config_bytes
    hashes.append(f"{hashlib.sha256(config_bytes).hexdigest()}  config/{config.path.name}")
    members["hashes.txt"] = ("\n".join(hashes) + "\n").encode()
    members["commands.sh"] = _commands(config, recipes, serves, ranks)
    members["journal.jsonl"] = _jsonl(e.to_json() for e in mine)
    alerts = dedupe_alerts(a for a in held.alerts
                           if a.t >= since and (a.subject in (*lanes, *nodes)))
    members["alerts.jsonl"] = _jsonl(vars(a) for a in alerts)

    # -- the summary ----------------------------------------------------------
    failure = first_fatal(rank_lines)
    node_of = {r.rank: r.node for rs in ranks.values() for r in rs}
    members = {name: scrub(data.decode(errors="replace"), src.secrets).encode()
               for name, data in members.items()}
    members, cuts = bound_members(members, member_cap=MEMBER_CAP_BYTES,
                                  total_cap=TOTAL_CAP_BYTES)
    fatal_t = parse_timestamp(failure.timestamp) if failure else None
    timeline = build_timeline(
        clocks,
        (TimelineItem(e.t, _journal_words(e), clock) for e in mine
         if (e.kind in ("begin", "end") or (e.kind == "outcome" and not e.ok))
         and (clock := stamp(e)) is not None),
        ([TimelineItem(since if fatal_t is None else fatal_t,
                       f"first fatal line, rank {failure.rank}: {failure.line[:160]}"
                       + (" (unstamped: at the window's start)" if fatal_t is None else ""),
                       OURS if fatal_t is None else NODES)] if failure else []),
        findings_timeline(findings),
        *(state_changes(rows.get(n, [])) for n in nodes),
        (TimelineItem(a.t, f"alert {a.level} {a.subject}") for a in alerts))
    incident = Incident(
        subject=subject, kind=kind, reason=reason, since=since, until=now, failure=failure,
        failure_node=node_of.get(failure.rank) if failure else None,
        findings=tuple(findings), alerts=tuple(alerts), dark=tuple(sorted(dark)),
        missing=tuple(missing + cuts), timeline=timeline, clocks=clocks)
    summary = scrub(render_summary(incident), src.secrets).encode()
    path = _write(src, subject, now, {"SUMMARY.md": summary, **members})
    return BundleResult(path, subject, incident, path.stat().st_size)


def journal_stamp(clock: Clock, clocks: Clocks) -> Callable[[Entry], str | None]:
    """Whose clock a journal entry is on, for this bundle's timelines: ours
    (:data:`OURS`), the nodes' (:data:`NODES`: a demo's entries, on its
    simulator's clock, bundled on wall time beside that simulator), or None:
    a clock this bundle has no timeline for (a shell's wall-clock entries in a
    demo's bundle). Such entries stay in journal.jsonl, off the timeline."""
    ours = clock_of(clock)

    def stamp(entry: Entry) -> str | None:
        if entry.clock == ours:
            return OURS
        if not clocks.shared and entry.clock == SIMULATED:
            return NODES
        return None

    return stamp


def bundle_clocks(src: BundleSources) -> Clocks:
    """Our clock, and whether the nodes stamp on it: yes in production (the
    nodes keep wall time) and in the demo (the console runs on its simulator's
    clock); no for a process on wall time beside a simulator of its own clock
    (`sparktui sim`: days behind and running faster)."""
    wall = isinstance(src.clock, SystemClock)
    return Clocks("wall clock (UTC)" if wall else "the simulator's clock (simulated UTC)",
                  shared=not (wall and src.config.simulator.enabled))


# -- resolving the subject --------------------------------------------------------

def _resolve(config: Config, subject: str, entries: list[Entry],
             held: Held) -> tuple[str, list[str], list[str]]:
    """(kind, lanes, nodes) of a lane or node name."""
    check_subject(config, subject)
    known_lanes = {e.target for e in entries if e.workflow == "serve"} | set(held.lane_nodes)
    if subject in config.nodes:
        lanes = sorted(lane for lane, ranks in held.lane_nodes.items()
                       if subject in ranks.values())
        return "node", lanes, [subject]
    if subject in known_lanes or recipe_file(config.recipes_dir, subject).is_file():
        return "lane", [subject], []
    raise InputError([Problem(config.path, None, "LANE|NODE",
                              f"{subject!r} is neither a node of the config nor a lane the "
                              f"journal or the recipes know")])


def default_since(serves: Sequence[Any], alerts: Iterable[HeldAlert],
                  subjects: Sequence[str], now: float) -> float:
    """The window a bundle covers when not told: from a minute before the last
    serve, reaching back to the serve before the latest incident of its
    subjects (an alert about them, from its first raise, or a serve that
    failed) when that came earlier: a lane re-served after its failure still
    bundles the failure, and a FATAL raised again for minutes its first raise.
    Without a serve: the last hour, or back to the latest incident."""
    starts = sorted(w.began_at for w in serves)
    incidents = incident_starts([a for a in alerts if a.subject in subjects])
    incidents += [w.ended_at for w in serves if w.ok is False and w.ended_at is not None]
    since = (starts[-1] - 60.0) if starts else now - DEFAULT_WINDOW_S
    if incidents:
        latest = max(incidents)
        before = [s for s in starts if s <= latest]
        since = min(since, (before[-1] if before else latest) - 60.0)
    return since


def check_subject(config: Config, subject: str) -> None:
    """InputError unless ``subject`` can name a lane or node: bounded and
    path-free (``../config`` is no name; 300 characters are no file name)."""
    if not SUBJECT.fullmatch(subject):
        raise InputError([Problem(config.path, None, "LANE|NODE",
                                  f"{subject[:80]!r}{'…' if len(subject) > 80 else ''} is not "
                                  f"a lane or node name (letters, digits, . _ -, at most "
                                  f"{SUBJECT_MAX} characters, no path)")])


def _recipe(config: Config, lane: str) -> Recipe | None:
    try:
        return load_recipe(config, lane)
    except InputError:
        return None


def _ranks(config: Config, lane: str, recipe: Recipe | None, serves: list[Any],
           held: Held) -> list[_Rank]:
    """Where each rank ran: as the console saw it, else as the lane's last serve
    placed it (a dark node's rank included: nothing here asks the node)."""
    if held.lane_nodes.get(lane):
        return [_Rank(rank, node, f"sparktui-{lane}-r{rank}")
                for rank, node in sorted(held.lane_nodes[lane].items())]
    mine = [w for w in serves if w.target == lane]
    cluster = (mine[-1].detail.get("cluster") if mine else None) or held.lane_cluster.get(lane) \
        or (recipe.cluster if recipe else None)
    if recipe is None or cluster not in config.clusters:
        return []
    return [_Rank(r.rank, r.node, r.container) for r in plan(config, recipe, cluster).ranks]


# -- parts ------------------------------------------------------------------------

async def _run(src: BundleSources, node: str, cmd: str) -> str:
    async with asyncio.timeout(src.timeout_s + 2.0):
        res = await src.link(node).run(cmd, src.timeout_s)
    if res.exit_status not in (0, None):
        said = (res.stderr or res.stdout).strip()[:200]
        raise _Refused(f"the command exited {res.exit_status}" + (f": {said}" if said else ""))
    return str(res.stdout)


class _Refused(RuntimeError):
    """The node answered and the command failed (e.g. the container is gone)."""


def _why(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, _Refused):
        return str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()[:200]
    # the operator reads why, not which class said it: the type only when it says nothing else
    return (str(exc) or type(exc).__name__)[:200]


def _plan(serves: list[Any], mine: list[Entry], held: Held, wfs: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if serves:
        w = serves[-1]
        out["serve"] = {"wf": w.wf, "began_at": w.began_at, "detail": w.detail,
                        "ended_at": w.ended_at, "ok": w.ok, "message": w.message}
    out["guard_verdicts"] = [{"wf": e.wf, "workflow": e.workflow, **v} for e in mine
                             if e.kind == "guards" for v in e.detail.get("verdicts", ())]
    out["overrides_and_refusals"] = [e.detail for e in mine if e.kind in ("override", "refused")]
    out["guards_reported"] = [g for g in held.guards if g.get("wf") in wfs]
    return out


def _commands(config: Config, recipes: dict[str, Recipe | None], serves: list[Any],
              ranks: dict[str, list[_Rank]]) -> bytes:
    out = ["# the commands that started each lane (as run, from the journal; else as "
           "rendered now)"]
    for lane, recipe in recipes.items():
        run = [s for w in serves if w.target == lane for s in w.steps]
        if run:
            out += [f"# {lane}: {s.step} on {s.target}\n{s.action}" for s in run]
        elif recipe is not None and ranks.get(lane):
            cluster = recipe.cluster
            for r in plan(config, recipe, cluster).ranks:
                out.append(f"# {lane} rank {r.rank} on {r.node} (rendered for {cluster})\n"
                           f"{r.command(None)}")
    return ("\n".join(out) + "\n").encode()


def _journal_words(e: Entry) -> str:
    if e.kind == "begin":
        return f"{e.workflow} {e.target} began ({e.wf})"
    if e.kind == "end":
        return f"{e.workflow} {e.target} ended {'ok' if e.ok else 'FAILED'}: {e.message[:160]}"
    return f"{e.workflow} {e.target}: {e.step} [{e.target}] failed: {e.message[:160]}"


def _text(lines: Iterable[str]) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def _json(data: Any) -> bytes:
    return (json.dumps(data, indent=2, default=str) + "\n").encode()


def _jsonl(items: Iterable[Any]) -> bytes:
    return "".join(json.dumps(i, default=str) + "\n" for i in items).encode()


def bundle_dir(state_dir: Path) -> Path:
    """``<state_dir>/bundles``, made if need be, 0700 (ops/private.py);
    InputError when it cannot be written (a read-only state dir, a symlink in
    its place), so nothing is collected in vain."""
    folder = state_dir / BUNDLE_DIR
    try:
        private_dir(state_dir, BUNDLE_DIR)
        writable = os.access(folder, os.W_OK | os.X_OK)
        why = "not writable"
    except OSError as exc:
        writable, why = False, exc.strerror or str(exc)
    if not writable:
        raise InputError([Problem(folder, None, "state_dir",
                                  f"cannot write a bundle here: {why}")])
    return folder


def bundle_name(subject: str, t: float) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(t))
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in subject)
    return f"{stamp}-{safe}"


def _write(src: BundleSources, subject: str, now: float, members: dict[str, bytes]) -> Path:
    """One gzip tarball, SUMMARY.md first, written under a temporary name and
    renamed into place (a reader never sees half a bundle)."""
    folder = bundle_dir(src.state_dir)
    stem = bundle_name(subject, now)
    path = folder / f"{stem}.tar.gz"
    n = 1
    while path.exists():
        n += 1
        path = folder / f"{stem}-{n}.tar.gz"
    tmp = path.with_name(f".{path.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # one a crash left, or a planted link (the link goes, not its target)
    fd = open_private(tmp, os.O_WRONLY | os.O_EXCL)
    with os.fdopen(fd, "wb") as f, tarfile.open(fileobj=f, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"{path.name.removesuffix('.tar.gz')}/{name}")
            info.size, info.mtime, info.mode = len(data), int(now), 0o600
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, path)  # a link planted at the name is replaced, never written through
    return path

