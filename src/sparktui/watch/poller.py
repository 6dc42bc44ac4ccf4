"""The node poller: one probe per node per tick, turned into NodeSnapshots.

Each node has its own loop: probe (over the node's long-lived shell) and
liveness check side by side, then sleep for what is left of the interval. The
next poll is scheduled only when the last one has ended, so a slow node (a
thrashing node is exactly a slow node) never has two probes in flight and
never delays the others.

Subscribers: `subscribe()` returns a bounded asyncio.Queue that receives every
new NodeSnapshot of every node. A queue that is full drops its oldest entry,
so a slow consumer sees the newest state and can never stall the poller.
`snapshot()` gives the latest ClusterSnapshot at any time.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from sparktui.adapters.endpoints import Endpoints
from sparktui.adapters.homeassistant import AuthRefused, SwitchState
from sparktui.adapters.ping import LivenessCheck, check_liveness
from sparktui.adapters.ssh import AuthError, HostKeyError, LoginStalled, ProbeStalled
from sparktui.core.clock import Clock, SystemClock
from sparktui.core.config import Config
from sparktui.core.errors import RemoteError, describe_error
from sparktui.core.probe import (
    FAST_SECTIONS,
    SLOW_SECTIONS,
    parse_probe,
    probe_script,
    with_slow,
)
from sparktui.core.state import (
    ClusterSnapshot,
    HistoryPoint,
    NodeSnapshot,
    NodeState,
    ProbeResult,
    ProbeTier,
)

log = logging.getLogger(__name__)

PowerSource = Callable[[str], Awaitable[SwitchState | None]]
"""``await power(node_name)``: the node's plug (on, off, unavailable; when it
last switched), None for a node without one. Ops plugs the Home Assistant
adapter in here."""

STARVED_AFTER_FAILURES = 2
"""Consecutive failed polls, liveness answering, that make a node *starved*
even though no shell was seen stalling (sshd refusing or not answering).
One stalled probe on a working shell is enough, and so is a session sshd
accepted whose login shell did not answer within the whole login budget;
login time is never counted against the probe timeout (a slow ``.bashrc``
is not thrash)."""

LATE_PROBE_S = 0.5
"""How long a node that answered its last poll gets to answer this one before
its liveness check and its plug are asked too: an answering shell replies in
milliseconds; a starved or lost one takes the whole probe timeout, which the
two checks then overlap."""

DEFAULT_HISTORY = 600
"""Samples kept per node: 20 minutes at the default 2 s interval."""


class Prober(Protocol):
    async def probe(self, script: str, timeout: float) -> str: ...


class ProberSource(Protocol):
    """What the poller needs from `adapters.ssh.Fleet`."""

    def get(self, name: str) -> Prober: ...


class Poller:
    def __init__(
        self,
        config: Config,
        fleet: ProberSource,
        endpoints: Endpoints,
        *,
        nodes: Sequence[str] | None = None,
        clock: Clock | None = None,
        liveness: LivenessCheck = check_liveness,
        power: PowerSource | None = None,
        history_len: int = DEFAULT_HISTORY,
    ) -> None:
        self._config = config
        self._fleet = fleet
        self._endpoints = endpoints
        self._clock = clock or SystemClock()
        self._liveness = liveness
        self._power = power
        self._refusal_said = False
        self.names: tuple[str, ...] = tuple(nodes if nodes is not None else config.nodes)
        self.interval_s = config.console.poll_interval_s
        self.probe_timeout_s = config.console.probe_timeout_s
        self.slow_interval_s = config.console.slow_probe_interval_s
        self._fast_scripts = {n: probe_script(config.nodes[n], FAST_SECTIONS)
                              for n in self.names}
        self._slow_scripts = {n: probe_script(config.nodes[n], SLOW_SECTIONS)
                              for n in self.names}
        self._slow: dict[str, ProbeResult] = {}
        """Each node's last slow-tier read, carried into its fast ticks."""
        self._slow_at: dict[str, float] = {}
        """When (epoch s) each node's last slow-tier read was asked for."""
        self._slow_due: dict[str, float] = dict.fromkeys(self.names, 0.0)
        """Monotonic time at which each node's loop next reads the slow tier."""
        self._latest: dict[str, NodeSnapshot] = {}
        self._history: dict[str, deque[HistoryPoint]] = {
            n: deque(maxlen=history_len) for n in self.names
        }
        self._locks = {n: asyncio.Lock() for n in self.names}
        """One poll per node at a time, even when `poll_round` meets the loops."""
        self._unchanged: dict[str, bool] = dict.fromkeys(self.names, True)
        """No workflow step acted on the node (`refresh`) since its latest poll
        began: that poll saw the node as it is."""
        self._queues: list[asyncio.Queue[NodeSnapshot]] = []
        self._tasks: list[asyncio.Task[None]] = []

    # -- reading -------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        """The latest snapshot of every node (UNKNOWN for those not polled yet)."""
        now = self._clock.time()
        return ClusterSnapshot(
            taken_at=now,
            nodes=tuple(
                self._latest.get(n) or NodeSnapshot(n, NodeState.UNKNOWN, now, error="not polled")
                for n in self.names
            ),
        )

    def history(self, name: str) -> tuple[HistoryPoint, ...]:
        """Oldest first; one point per successful probe."""
        return tuple(self._history[name])

    def subscribe(self, maxsize: int = 256) -> asyncio.Queue[NodeSnapshot]:
        queue: asyncio.Queue[NodeSnapshot] = asyncio.Queue(maxsize)
        self._queues.append(queue)
        return queue

    # -- running -------------------------------------------------------------

    def start(self) -> None:
        """Start one polling loop per node; `stop()` cancels them."""
        if self._tasks:
            return
        self._tasks = [asyncio.create_task(self._loop(n), name=f"poll:{n}") for n in self.names]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> Poller:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def poll_round(self) -> ClusterSnapshot:
        """Poll every node once, concurrently (what `sparktui health` does)."""
        await asyncio.gather(*(self.poll_node(n) for n in self.names))
        return self.snapshot()

    def refresh(self, name: str) -> None:
        """A workflow step acted on ``name``: read its slow tier (containers,
        disks ...) on its next tick, and let no poll begun before now answer
        for it. Unknown names are ignored."""
        if name in self._slow_due:
            self._slow_due[name] = 0.0
            self._unchanged[name] = False

    async def _loop(self, name: str) -> None:
        while True:
            started = self._clock.monotonic()
            due = started >= self._slow_due[name]
            await self.poll_node(name, ProbeTier.FULL if due else ProbeTier.FAST)
            elapsed = self._clock.monotonic() - started
            await self._clock.sleep(max(0.0, self.interval_s - elapsed))

    # -- one poll ------------------------------------------------------------

    async def poll_node(self, name: str, tier: ProbeTier = ProbeTier.FULL) -> NodeSnapshot:
        """Poll one node, record and publish the snapshot. Never raises.

        An explicit poll (a workflow's check, `health`) reads both tiers; the
        node's loop reads the slow tier every ``slow_probe_interval_s``.

        A poll asked for while one of the node is in flight waits for it, and
        takes its answer when the node did not answer it: that poll has just
        spent the node's whole timeout, and another would spend it again (a
        starved node's recover confirm took two SSH login timeouts to show).
        A node that answered is read again (it answers fast), and so is a node
        a workflow step acted on after that poll began (`refresh`): a power
        cycle's re-check once SSH answered must not take the answer of a poll
        begun while the node was still off."""
        lock = self._locks[name]
        in_flight = lock.locked()
        async with lock:
            latest = self._latest.get(name)
            if (in_flight and latest is not None and latest.state is not NodeState.ONLINE
                    and self._unchanged[name]):
                return latest
            self._unchanged[name] = True
            try:
                snap = await self._poll(name, tier)
            except Exception as exc:  # a bug must not stop the node's loop
                log.exception("polling %s failed", name)
                why = describe_error(exc, with_type=True)
                snap = self._snap(name, NodeState.UNKNOWN, error=f"internal error: {why}")
            self._record(snap)
            return snap

    async def _poll(self, name: str, tier: ProbeTier) -> NodeSnapshot:
        """The liveness check and the plug tell a node that does not answer
        apart (starved, lost, powered off); an answering node's fast tick
        carries their last answers, as it carries the slow fields. Asking both
        for every node on every tick was, at 8 nodes, four ``ping`` processes
        a second on the console's host (or four TCP connections to the
        nodes) and four Home Assistant requests, for answers no one reads.
        They are asked beside the probe when the last poll failed (or the
        tier is slow), and once the probe has not answered within
        LATE_PROBE_S when it had: a node that stops answering is still
        classified when its probe times out."""
        previous = self._latest.get(name)
        ask_now = tier is ProbeTier.FULL or previous is None or previous.probe is None
        async with asyncio.TaskGroup() as tasks:
            probing = tasks.create_task(self._probe(name))
            checks = tasks.create_task(self._checks(name)) if ask_now else None
            if checks is None:
                waiting = tasks.create_task(self._clock.sleep(LATE_PROBE_S))
                await asyncio.wait((probing, waiting), return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
                if not probing.done() or probing.result()[0] is None:
                    checks = tasks.create_task(self._checks(name))
        text, error, latency = probing.result()
        if checks is not None:
            (alive, liveness_error), plug = checks.result()
            powered, switched = (plug.powered, plug.last_changed) if plug else (None, "")
        else:
            assert previous is not None  # asked now otherwise
            alive, liveness_error = previous.liveness, ""
            powered, switched = previous.powered, previous.plug_changed
        if text is not None:
            probe = parse_probe(text, FAST_SECTIONS)
            if tier is ProbeTier.FULL:
                probe = await self._read_slow(name, probe)
            else:
                probe = with_slow(probe, self._slow.get(name), fresh=False)
            return self._snap(
                name,
                NodeState.ONLINE,
                probe=probe,
                latency=latency,
                alive=alive,
                powered=powered,
                switched=switched,
            )
        assert error is not None
        if powered is False:
            state = NodeState.POWERED_OFF
        elif isinstance(error, HostKeyError | AuthError):
            state = NodeState.UNKNOWN
        elif alive:
            previous = self._latest.get(name)
            failures = (previous.consecutive_failures if previous else 0) + 1
            stall = isinstance(error, ProbeStalled | LoginStalled)
            starved = stall or failures >= STARVED_AFTER_FAILURES
            state = NodeState.STARVED if starved else NodeState.UNKNOWN
        elif alive is None:
            state = NodeState.UNKNOWN
        else:
            state = NodeState.UNREACHABLE
        return self._snap(
            name,
            state,
            error=f"{error}; liveness check failed: {liveness_error}"
            if liveness_error
            else str(error),
            alive=alive,
            powered=powered,
            switched=switched,
            stalled=isinstance(error, ProbeStalled),
        )

    async def _read_slow(self, name: str, fast: ProbeResult) -> ProbeResult:
        """The slow tier, as its own script after the fast one answered: a
        ``docker`` that hangs costs this tick's slow fields (the last ones are
        kept, with the reason), never a false "starved"."""
        self._slow_due[name] = self._clock.monotonic() + self.slow_interval_s
        asked = self._clock.time()
        try:
            text = await self._fleet.get(name).probe(self._slow_scripts[name],
                                                     self.probe_timeout_s)
        except RemoteError as exc:
            return with_slow(fast, self._slow.get(name), fresh=False, problem=exc.message)
        slow = self._slow[name] = parse_probe(text, SLOW_SECTIONS)
        self._slow_at[name] = asked
        return with_slow(fast, slow, fresh=True)

    async def _probe(self, name: str) -> tuple[str | None, RemoteError | None, float]:
        """(fast-tier output, error, seconds the probe took)."""
        started = self._clock.monotonic()
        try:
            text = await self._fleet.get(name).probe(self._fast_scripts[name],
                                                     self.probe_timeout_s)
        except RemoteError as exc:
            return None, exc, self._clock.monotonic() - started
        return text, None, self._clock.monotonic() - started

    async def _checks(self, name: str) -> tuple[tuple[bool | None, str], SwitchState | None]:
        """(liveness, plug), asked side by side."""
        alive, powered = await asyncio.gather(self._alive(name), self._powered(name))
        return alive, powered

    async def _alive(self, name: str) -> tuple[bool | None, str]:
        """(alive, why the check could not run); alive is None when it could not."""
        timeout = self._config.liveness.timeout_s
        try:
            async with asyncio.timeout(timeout + 2.0):  # in case a check ignores its timeout
                return await self._liveness(self._endpoints.node(name), timeout), ""
        except TimeoutError:
            return False, ""
        except (ValueError, OSError) as exc:
            log.warning("liveness check of %s failed: %s", name, exc)
            return None, str(exc)

    async def _powered(self, name: str) -> SwitchState | None:
        if self._power is None:
            return None
        try:
            async with asyncio.timeout(self.probe_timeout_s):
                return await self._power(name)
        except AuthRefused as exc:  # the same for every plug: said once, never retried
            if not self._refusal_said:
                self._refusal_said = True
                log.warning("plug states unknown: %s", describe_error(exc))
            return None
        except Exception as exc:  # an unreachable HA says nothing about the node
            log.warning("power state of %s unknown: %s", name, describe_error(exc))
            return None

    def _snap(
        self,
        name: str,
        state: NodeState,
        *,
        probe: ProbeResult | None = None,
        error: str = "",
        latency: float | None = None,
        alive: bool | None = None,
        powered: bool | None = None,
        switched: str = "",
        stalled: bool = False,
    ) -> NodeSnapshot:
        now = self._clock.time()
        previous = self._latest.get(name)
        ok = probe is not None
        failures = 0 if ok else (previous.consecutive_failures if previous else 0) + 1
        return NodeSnapshot(
            node=name,
            state=state,
            taken_at=now,
            probe=probe,
            error=error,
            probe_latency_s=latency,
            liveness=alive,
            powered=powered,
            plug_changed=switched,
            stalled=stalled,
            consecutive_failures=failures,
            last_ok_at=now if ok else (previous.last_ok_at if previous else None),
            containers_at=self._slow_at.get(name) if ok else None,
        )

    def _record(self, snap: NodeSnapshot) -> None:
        self._latest[snap.node] = snap
        if snap.probe is not None:
            mem, psi = snap.probe.meminfo, snap.probe.psi
            self._history[snap.node].append(
                HistoryPoint(
                    t=snap.taken_at,
                    mem_available_kib=mem.available_kib if mem else None,
                    mem_total_kib=mem.total_kib if mem else None,
                    psi_some_avg10=psi.some.avg10 if psi else None,
                    psi_full_avg10=psi.full.avg10 if psi and psi.full else None,
                )
            )
        for queue in self._queues:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(snap)
