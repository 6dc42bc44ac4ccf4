from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.ssh_test_server import SshTestServer


@pytest.fixture
async def ssh_server(tmp_path: Path) -> AsyncIterator[SshTestServer]:
    server = SshTestServer(tmp_path)
    await server.start()
    yield server
    await server.stop()
