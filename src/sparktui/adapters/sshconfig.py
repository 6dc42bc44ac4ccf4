"""Host aliases of the OpenSSH client config (``~/.ssh/config``), resolved
with asyncssh's own parser: HostName, Port, User and IdentityFile all apply,
as they do for ``ssh ALIAS``. The alias is a name only ssh knows: liveness
checks and the engines' HTTP endpoints need the resolved address."""

from __future__ import annotations

import getpass
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncssh
from asyncssh.config import SSHClientConfig


@dataclass(frozen=True)
class SshTarget:
    host: str
    """The address to reach (the alias's HostName, or the name itself)."""
    port: int | None
    """None when the config does not set one."""
    user: str | None
    identity_files: tuple[str, ...]


class SshConfigError(Exception):
    """The ssh_config file cannot be parsed (names the file)."""


def resolve_alias(name: str, config_files: Sequence[str]) -> SshTarget:
    """What ``name`` means in ``config_files`` (missing files are skipped)."""
    paths = [p for p in config_files if Path(p).is_file()]
    if not paths:
        return SshTarget(name, None, None, ())
    try:
        cfg = SSHClientConfig.load(None, paths, False, False, False, getpass.getuser(),
                                   (), name, ())
    except (OSError, asyncssh.Error, ValueError) as exc:
        raise SshConfigError(f"{', '.join(paths)}: {exc}") from None
    host = cfg.get("Hostname", name)
    port = cfg.get("Port")
    user = cfg.get("User")
    found = cfg.get("IdentityFile", ())
    files = found if isinstance(found, list | tuple) else ()
    return SshTarget(
        str(host) if host else name,
        int(port) if isinstance(port, int | str) and str(port).isdigit() else None,
        str(user) if isinstance(user, str) else None,
        tuple(str(Path(str(f)).expanduser()) for f in files),
    )
