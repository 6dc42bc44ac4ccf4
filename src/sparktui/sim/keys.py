"""Host keys, the client key and the known_hosts file of a simulated cluster."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from sparktui.ops.files import replace_file
from sparktui.ops.private import FILE_MODE, open_private, private_dir


@dataclass
class KeyMaterial:
    client_key: asyncssh.SSHKey
    client_key_path: Path
    known_hosts_path: Path
    authorized: asyncssh.SSHAuthorizedKeys


def make_client_key(directory: Path) -> KeyMaterial:
    private_dir(directory)
    key = asyncssh.generate_private_key("ssh-ed25519", comment="sparktui-sim-client")
    path = directory / "id_ed25519"
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a leftover may be wider than 0600: never write into it
    fd = open_private(path, os.O_WRONLY | os.O_EXCL)  # 0600 before the key is in it
    with os.fdopen(fd, "wb") as f:
        f.write(key.export_private_key())
    replace_file(directory / "id_ed25519.pub", key.export_public_key().decode(), FILE_MODE)
    authorized = asyncssh.import_authorized_keys(key.export_public_key().decode())
    return KeyMaterial(key, path, directory / "known_hosts", authorized)


def host_keys(names: list[str], *, shared: bool) -> dict[str, asyncssh.SSHKey]:
    """One ed25519 host key per node, or one for all (the seeds' cloned image)."""
    if shared:
        key = asyncssh.generate_private_key("ssh-ed25519")
        return dict.fromkeys(names, key)
    return {n: asyncssh.generate_private_key("ssh-ed25519") for n in names}


def write_known_hosts(path: Path, entries: list[tuple[int, asyncssh.SSHKey]]) -> None:
    lines = [f"[127.0.0.1]:{port} " + key.export_public_key().decode().strip().split(" ")[0]
             + " " + key.export_public_key().decode().strip().split(" ")[1]
             for port, key in entries]
    replace_file(path, "\n".join(lines) + "\n", FILE_MODE)
