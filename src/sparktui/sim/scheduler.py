"""A tiny discrete-event scheduler: simulated processes are generators that
yield how long to sleep (seconds) or a predicate to wait for.

Everything that happens over simulated time (an engine's boot, a node's
power-on, a thrash burst) is such a process, so the whole cluster advances
deterministically, in event order, whatever drives the clock.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass

Wait = float | Callable[[], bool]
Process = Generator[Wait, None, None]


@dataclass(eq=False)
class Proc:
    name: str
    gen: Process
    wake: float | None = 0.0
    """Time of the next step, or None while waiting on `until`."""
    until: Callable[[], bool] | None = None
    gate: Callable[[], bool] | None = None
    """While this returns False the process is frozen (its node is thrashing)."""
    done: bool = False


class Scheduler:
    def __init__(self) -> None:
        self.t = 0.0
        """The current simulated time (the time of the event being processed)."""
        self._procs: list[Proc] = []
        self.steps = 0
        self.errors: list[tuple[str, BaseException]] = []
        """Processes that raised: dropped, kept here so one bug cannot stop the cluster."""

    def spawn(self, name: str, gen: Process, *, delay: float = 0.0) -> Proc:
        proc = Proc(name, gen, wake=self.t + delay)
        self._procs.append(proc)
        return proc

    def cancel(self, proc: Proc | None) -> None:
        if proc is None or proc.done:
            return
        proc.done = True
        proc.gen.close()
        if proc in self._procs:
            self._procs.remove(proc)

    def run_until(self, target: float, *, before: Callable[[float], None] | None = None,
                  after: Callable[[], None] | None = None) -> None:
        """Process every event due at or before `target`, in time order.
        `before(t)` runs ahead of each step (bring continuous state to t),
        `after()` behind it (react to what the step changed)."""
        while True:
            self._release_waiters()
            due = [p for p in self._procs if p.wake is not None and p.wake <= target
                   and (p.gate is None or p.gate())]
            if not due:
                break
            proc = min(due, key=lambda p: p.wake or 0.0)
            t = max(self.t, proc.wake or 0.0)
            if before is not None:
                before(t)
            self.t = t
            self._step(proc)
            if after is not None:
                after()
        if before is not None:
            before(max(self.t, target))
        self.t = max(self.t, target)

    def _release_waiters(self) -> None:
        for p in list(self._procs):
            if (p.wake is None and p.until is not None and (p.gate is None or p.gate())
                    and p.until()):
                p.until = None
                p.wake = self.t

    def _step(self, proc: Proc) -> None:
        self.steps += 1
        try:
            what = next(proc.gen)
        except StopIteration:
            proc.done = True
            self._procs.remove(proc)
            return
        except Exception as exc:  # recorded; the simulation goes on
            self.errors.append((proc.name, exc))
            proc.done = True
            self._procs.remove(proc)
            return
        if callable(what):
            proc.wake, proc.until = None, what
        else:
            proc.wake = self.t + max(0.0, float(what))
