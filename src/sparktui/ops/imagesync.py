"""Image sync node to node: ``docker save IMAGE`` on a node that has it is
streamed over SSH into ``docker load`` on the node that lacks it, then the
image's ``sparktui.checksum`` label is read on both ends and must match.

The bytes flow through this process (source channel -> target channel), as
the seeds' launcher did, so neither node needs an SSH key to the other.
"""

from __future__ import annotations

import shlex
from collections.abc import AsyncIterator, Awaitable, Callable

from sparktui.adapters.ssh import Fleet
from sparktui.core.errors import RemoteError

SYNC_TIMEOUT_S = 3600.0
"""A 31 GB image at ~1 GB/s takes ~30 s; on a 1 Gbit/s management link ~5 min."""
CHECKSUM_TIMEOUT_S = 30.0


def checksum_command(image: str) -> str:
    return ("docker image inspect --format '{{index .Config.Labels \"sparktui.checksum\"}}' "
            f"{shlex.quote(image)}")


def sync_commands(image: str) -> tuple[str, str]:
    """(source command, target command)."""
    return f"docker save {shlex.quote(image)}", "docker load"


def ssh_image_pipe(
        fleet: Fleet) -> Callable[[str, str, str, Callable[[int], None]], Awaitable[int]]:
    """An image pipe (see ops/context.ImagePipe) over the fleet's connections."""

    async def pipe(image: str, source: str, target: str,
                   progress: Callable[[int], None]) -> int:
        save, load = sync_commands(image)
        sent = 0

        async def saved() -> AsyncIterator[bytes]:
            nonlocal sent
            async for chunk in fleet.get(source).stream(f"{save} 2>/dev/null"):
                sent += len(chunk)
                progress(sent)
                yield chunk

        done = await fleet.get(target).run_with_input(load, saved(), SYNC_TIMEOUT_S)
        if done.exit_status != 0:
            raise RemoteError(target, load, f"exit {done.exit_status}: {done.stdout.strip()[:300]}")
        if sent == 0:
            raise RemoteError(source, save, "docker save produced no bytes")
        return sent

    return pipe
