"""The kernel pin rule: which running kernel (``uname -r``) is qualified.

``uname -r`` carries a flavour suffix that config entries leave out:
``6.17.0-1031-nvidia`` is release ``6.17.0-1031``, but ``6.17.0-10310`` is not.
"""

from __future__ import annotations

from .config import GuardConfig


def release_matches(running: str, release: str) -> bool:
    return running == release or running.startswith(release + "-")


def known_bad(guards: GuardConfig, running: str) -> str | None:
    """The known-bad release ``running`` is, if any."""
    return next((bad for bad in guards.kernel_bad if release_matches(running, bad)), None)


def off_pin(guards: GuardConfig, running: str) -> bool:
    """A pin is set and ``running`` is not it."""
    return bool(guards.kernel_pin) and not release_matches(running, guards.kernel_pin)
