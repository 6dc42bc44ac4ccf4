"""The simulator's client private key is 0600 from the moment it exists."""

from __future__ import annotations

import os

from sparktui.sim.keys import make_client_key


def test_private_key_is_created_0600_even_with_umask_0(tmp_path):
    old = os.umask(0)
    try:
        (tmp_path / "id_ed25519").write_text("leftover")
        os.chmod(tmp_path / "id_ed25519", 0o666)
        keys = make_client_key(tmp_path)
    finally:
        os.umask(old)
    assert keys.client_key_path.stat().st_mode & 0o777 == 0o600
    assert b"PRIVATE KEY" in keys.client_key_path.read_bytes()
