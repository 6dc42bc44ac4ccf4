"""Which confirmation an action needs (the same rule for the TUI and the CLI).

- Any overridden guard: the operator types the target's name; ``--yes`` is not
  enough (an override is a decision, never a default).
- Destructive actions (stop, power, recover, cluster power, resume): typed
  name too, but ``--yes`` may stand in for it (scripts, the end of night).
- Serve without overrides: a plain yes/no; ``--yes`` stands in.
Refused actions need no confirmation: they do not run.
"""

from __future__ import annotations

from dataclasses import dataclass

from sparktui.ops.guards import GuardReport

DESTRUCTIVE = frozenset({"stop", "power-cycle", "power-on", "power-off", "recover",
                         "cluster-power-on", "cluster-power-off", "resume", "runlock-close"})


@dataclass(frozen=True)
class Confirmation:
    target: str
    typed: bool
    """The operator must type ``target`` exactly."""
    yes_allowed: bool
    """``--yes`` (or the TUI's default button) may stand in."""
    reason: str

    def prompt(self) -> str:
        if self.typed:
            return f"{self.reason}. Type {self.target!r} to go on: "
        return f"{self.reason}. Go on? [y/N] "

    def accepts(self, answer: str) -> bool:
        answer = answer.strip()
        if self.typed:
            return answer == self.target
        return answer.lower() in ("y", "yes")


def confirmation_for(kind: str, target: str, report: GuardReport | None = None) -> Confirmation:
    if report is not None and report.overridden:
        names = ", ".join(sorted({v.override.value for v in report.overridden if v.override}))
        return Confirmation(target, True, False, f"{kind} {target} overrides: {names}")
    if kind in DESTRUCTIVE:
        return Confirmation(target, True, True, f"{kind} {target} changes the cluster")
    return Confirmation(target, False, True, f"{kind} {target}")
