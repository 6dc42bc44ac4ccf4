"""The HTTP side of the Prometheus export: ``GET /metrics`` on one address,
nothing else (prometheus_client renders the text format; aiohttp serves it
on the sentinel's own event loop, so the task has an owner and ends with it,
where prometheus_client's ``start_http_server`` would leave a thread).

Rendering runs on the loop: it reads the collector's latest events and the
journal's new lines, a few milliseconds for a fleet of eight nodes.
"""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from sparktui.core.listen import Listen


class ListenError(OSError):
    """The address is taken or not this machine's (the message names it)."""


class MetricsServer:
    """``/metrics`` of ``registry`` on ``listen`` from `start` to `close`."""

    def __init__(self, listen: Listen, registry: CollectorRegistry) -> None:
        self.listen = listen
        self._registry = registry
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        """Bind (`ListenError` when the address is taken or not ours, with the address)."""
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.listen.host, self.listen.port).start()
        except OSError as exc:
            await runner.cleanup()
            raise ListenError(exc.errno, f"cannot listen on {self.listen} for /metrics: "
                                     f"{exc.strerror or exc}") from None
        self._runner = runner

    @property
    def address(self) -> Listen:
        """Where it listens (the port the kernel chose when ``listen`` says 0)."""
        if self._runner is None or not self._runner.addresses:
            return self.listen
        host, port = self._runner.addresses[0][:2]
        return Listen(host, port)

    async def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
