"""The read-only browser view: textual-serve runs one console process per
browser session (a websocket to a ``sparktui console --read-only`` attached to
the sentinel), and this module adds what textual-serve leaves out.

- **A token** when one is configured: the first request carries ``?token=``;
  the server answers with an HttpOnly, SameSite=Strict cookie and a redirect
  to the same address without the token, and every later request (the page,
  its websocket, its static files) must carry either. The
  comparison is constant-time. Without a token only loopback is served (the
  CLI refuses anything else: sparkrun-ui and textual-serve have no auth at all).
- **No other site's page**: a request from another origin is refused (a
  websocket names its page's origin: cross-site websocket hijacking), and
  without a token a ``Host`` that is not loopback too (DNS rebinding).
- **Its own addresses as the browser used them**: textual-serve writes the
  listen address into the page, no address at all when it is 0.0.0.0 or ``::``.
- **Nothing from outside**: textual-serve's page links Google Fonts; ours
  (web_templates/) does not, so a browser on an air-gapped night desk loads
  every byte from this server.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
from aiohttp import web
from textual_serve.server import Server, to_int

from sparktui.core.listen import Listen, is_loopback

COOKIE = "sparktui_web"
TEMPLATES = Path(__file__).with_name("web_templates")


class ConsoleWebServer(Server):
    """textual-serve's server with an optional token and our page template."""

    def __init__(self, command: str, listen: Listen, *, title: str,
                 check_token: Callable[[str], bool] | None) -> None:
        """``check_token(presented)``: True when it is the configured token
        (None: no token, loopback only)."""
        super().__init__(command, host=listen.host, port=listen.port, title=title,
                         public_url=f"http://{listen}")
        self.templates_path = TEMPLATES
        self._check = check_token

    def initialize_logging(self) -> None:
        """Plain lines (textual-serve's rich handler prints tracebacks with
        their locals: a request's token among them)."""
        logging.basicConfig(level=logging.INFO, format="sparktui web: %(message)s")

    async def on_startup(self, app: web.Application) -> None:
        need = "with its token" if self._check is not None else "loopback, no token"
        print(f"sparktui web: the read-only console at {self.public_url}/ ({need}); "
              "Ctrl+C stops it", flush=True)

    def serve(self, debug: bool = False) -> None:
        """Until SIGINT/SIGTERM, without an access log (a first request's URL
        carries the token)."""
        self.initialize_logging()
        web.run_app(self._make_app(), host=self.host, port=self.port, access_log=None,
                    print=lambda *args: None)

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._same_origin)
        if self._check is not None:
            app.middlewares.append(self._require_token)
        return app

    @web.middleware
    async def _same_origin(
            self, request: web.Request,
            handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) \
            -> web.StreamResponse:
        """No other site's page reaches the console through the operator's
        browser: a request that says it comes from another origin (a websocket
        always says) is refused, and without a token only a loopback ``Host``
        is served (a name of the attacker's that resolves to 127.0.0.1, DNS
        rebinding, would otherwise be this origin)."""
        origin = request.headers.get("Origin")
        # the host only: behind a TLS proxy the page is https, this request http
        if origin is not None and urlsplit(origin).netloc != request.host:
            return web.Response(status=403, text="403: a page of another site may not use "
                                                 "this sparktui view")
        if self._check is None and not is_loopback(_hostname(request.host)):
            return web.Response(status=403, text="403: this sparktui view has no token and "
                                                 "answers to a loopback address only")
        return await handler(request)

    @web.middleware
    async def _require_token(
            self, request: web.Request,
            handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) \
            -> web.StreamResponse:
        assert self._check is not None
        presented = request.query.get("token") or request.cookies.get(COOKIE, "")
        if not presented or not self._check(presented):
            return web.Response(status=401, text="401: this sparktui view needs its token: "
                                                 "open the address with ?token=...")
        if "token" in request.query:
            # the cookie carries it from now on; the address the browser shows,
            # keeps in its history and sends as Referer no longer does
            query = {k: v for k, v in request.query.items() if k != "token"}
            response = web.HTTPSeeOther(str(request.rel_url.with_query(query)))
            response.set_cookie(COOKIE, presented, httponly=True, samesite="Strict")
            return response
        return await handler(request)

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        """textual-serve's page, its addresses those the browser used: the
        listen address is no address to a browser when it is 0.0.0.0 or ::,
        and the page's websocket would go nowhere."""
        # a TLS proxy in front says so (the page is https: its websocket must be wss)
        secure = request.scheme == "https" or request.headers.get("X-Forwarded-Proto") == "https"
        origin = f"{'https' if secure else 'http'}://{request.host}"
        static = str(request.app.router["static"].url_for(filename="/")).rstrip("/") + "/"
        ws = request.app.router["websocket"].url_for()
        return {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"{'wss' if secure else 'ws'}://{request.host}{ws}",
            "config": {"static": {"url": origin + static}},
            "application": {"name": self.title},
        }


def _hostname(host: str) -> str:
    """``127.0.0.1:8765`` -> ``127.0.0.1``, ``[::1]:8765`` -> ``::1`` (the
    standard library's reading of an address's host part)."""
    return urlsplit(f"//{host}").hostname or host


def token_checker(header: str) -> Callable[[str], bool]:
    """A constant-time check of a presented token against ``Bearer <token>``
    (the loaded token's only view of itself)."""
    return lambda presented: hmac.compare_digest(f"Bearer {presented}".encode(),
                                                 header.encode())
