"""Image sync node to node: ``docker save IMAGE`` on a node that has it is
streamed over SSH into ``docker load`` on the node that lacks it, then the
image's ``sparktui.checksum`` label is read on both ends and must match.

The bytes flow through this process (source channel -> target channel), as
the seeds' launcher did, so neither node needs an SSH key to the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import Awaitable, Callable

import asyncssh

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
        src = fleet.get(source)
        dst = fleet.get(target)
        try:
            async with asyncio.timeout(SYNC_TIMEOUT_S):
                conn = await dst.connection()
                proc = await conn.create_process(load, encoding=None, stderr=asyncssh.STDOUT)
                sent = 0
                try:
                    async for chunk in src.stream(f"{save} 2>/dev/null"):
                        proc.stdin.write(chunk)
                        await proc.stdin.drain()
                        sent += len(chunk)
                        progress(sent)
                    proc.stdin.write_eof()
                    done = await proc.wait()
                finally:
                    proc.close()
                    with contextlib.suppress(Exception):
                        await proc.wait_closed()
        except TimeoutError:
            raise RemoteError(target, load, f"image sync from {source} timed out after "
                                            f"{SYNC_TIMEOUT_S:g} s") from None
        except (OSError, asyncssh.Error) as exc:
            raise RemoteError(target, load, f"{type(exc).__name__}: {exc}") from None
        if done.exit_status != 0:
            out = done.stdout.decode(errors="replace") if isinstance(done.stdout, bytes) else ""
            raise RemoteError(target, load, f"exit {done.exit_status}: {out.strip()[:300]}")
        if sent == 0:
            raise RemoteError(source, save, "docker save produced no bytes")
        return sent

    return pipe
