"""Home Assistant's REST API as far as sparktui uses it (REFERENCE.md §3):
bearer auth, `/api/`, `/api/states/<id>`, `/api/services` (the list),
`/api/services/switch/turn_on|off` and `/api/services/notify/<name>`.
Switch state drives node power; faults: answer 500, hang, entity unavailable,
502 from a proxy that echoes the request's headers (Authorization included) in
its body. Like a real Home Assistant with ``ip_ban_enabled``, a client that
fails to log in ``ip_ban_threshold`` times is banned: 403 to everything after."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from .timefmt import iso_ha

if TYPE_CHECKING:
    from .cluster import Sim

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
IP_BAN_THRESHOLD = 3
"""Home Assistant's ``login_attempts_threshold`` as the simulator sets it."""
NOTIFY_SERVICES = ("mobile_app_pixel_8", "persistent_notification")
"""The simulated Home Assistant's ``notify`` services: the operator's phone, and
the one every Home Assistant has. Another name answers 400, as a real one does."""


class HomeAssistant:
    def __init__(self, sim: Sim, token: str, rng: random.Random) -> None:
        self.sim = sim
        self.token = token
        self.rng = rng
        self.fault = ""
        """``""``, ``500``, ``hang`` or ``502-echo``."""
        self.ip_ban_threshold = IP_BAN_THRESHOLD
        """Failed logins before a client address is banned (0: never)."""
        self.failed_logins: dict[str, int] = {}
        self.banned: set[str] = set()
        self.requests = 0
        """Every request that reached it, answered or not (for tests)."""
        self.changed_t = {e: sim.wall() for e in sim.spec.entities}
        self.context = {e: self._ulid() for e in sim.spec.entities}
        self.calls: list[tuple[str, str]] = []
        """(service, entity) of every accepted service call, for tests."""
        self.notifications: list[tuple[str, dict[str, object]]] = []
        """(notify service, body) of every accepted ``notify.*`` call, for tests."""

    def _ulid(self) -> str:
        return "01" + "".join(self.rng.choice(_CROCKFORD) for _ in range(24))

    def state_obj(self, entity_id: str) -> dict[str, object]:
        spec = self.sim.spec.entities[entity_id]
        attrs: dict[str, object] = {"friendly_name": spec.friendly_name}
        if spec.state == "unavailable":
            attrs = {"restored": True, "friendly_name": spec.friendly_name,
                     "supported_features": 0}
        t = iso_ha(self.changed_t[entity_id])
        return {"entity_id": entity_id, "state": spec.state, "attributes": attrs,
                "last_changed": t, "last_reported": t, "last_updated": t,
                "context": {"id": self.context[entity_id], "parent_id": None, "user_id": None}}

    def app(self) -> web.Application:
        @web.middleware
        async def guard(request: web.Request,
                        handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) \
                -> web.StreamResponse:
            self.requests += 1
            peer = request.remote or "?"
            if peer in self.banned:
                return web.Response(status=403, text="403: Forbidden")
            if self.fault == "hang":
                await asyncio.Event().wait()
            if self.fault == "500":
                return web.Response(status=500, text="500: Internal Server Error")
            if self.fault == "502-echo":
                echoed = "\n".join(f"{k}: {v}" for k, v in request.headers.items())
                return web.Response(status=502, text=f"502 Bad Gateway\n{echoed}")
            if request.headers.get("Authorization", "") != f"Bearer {self.token}":
                self.failed_logins[peer] = self.failed_logins.get(peer, 0) + 1
                if self.ip_ban_threshold and self.failed_logins[peer] >= self.ip_ban_threshold:
                    self.banned.add(peer)
                return web.Response(status=401, text="401: Unauthorized")
            self.sim.sync()
            return await handler(request)

        async def root(request: web.Request) -> web.Response:
            return web.json_response({"message": "API running."})

        async def services(request: web.Request) -> web.Response:
            # the shape of HA's GET /api/services: a list of {domain, services}
            return web.json_response([
                {"domain": "switch", "services": {s: {"name": s.replace("_", " "),
                                                      "fields": {}}
                                                  for s in ("turn_on", "turn_off", "toggle")}},
                {"domain": "notify", "services": {s: {"name": f"Send a notification via {s}",
                                                      "fields": {}}
                                                  for s in NOTIFY_SERVICES}},
            ])

        async def state(request: web.Request) -> web.Response:
            entity = request.match_info["entity_id"]
            if entity not in self.sim.spec.entities:
                return web.json_response({"message": "Entity not found."}, status=404)
            return web.json_response(self.state_obj(entity))

        async def service(request: web.Request) -> web.Response:
            domain, svc = request.match_info["domain"], request.match_info["service"]
            try:
                body = json.loads(await request.text() or "{}")
            except ValueError:
                return web.json_response({"message": "Data should be valid JSON."}, status=400)
            if domain == "notify" and svc in NOTIFY_SERVICES and isinstance(body, dict) \
                    and "message" in body:
                self.notifications.append((f"notify.{svc}", body))
                return web.json_response([])
            if domain != "switch" or svc not in ("turn_on", "turn_off"):
                return web.Response(status=400, text="400: Bad Request")
            ids = body.get("entity_id") if isinstance(body, dict) else None
            ids = [ids] if isinstance(ids, str) else ids
            if not isinstance(ids, list):
                return web.Response(status=400, text="400: Bad Request")
            changed = []
            for entity in ids:
                if self.switch(str(entity), svc == "turn_on"):
                    changed.append(self.state_obj(str(entity)))
            await self.sim.settle()
            return web.json_response(changed)

        app = web.Application(middlewares=[guard])
        app.router.add_get("/api/", root)
        app.router.add_get("/api/states/{entity_id}", state)
        app.router.add_get("/api/services", services)
        app.router.add_post("/api/services/{domain}/{service}", service)
        return app

    def switch(self, entity: str, on: bool) -> bool:
        """Apply a service call; True when the state changed (unavailable: skipped)."""
        spec = self.sim.spec.entities.get(entity)
        if spec is None or spec.state == "unavailable":
            return False
        self.calls.append(("turn_on" if on else "turn_off", entity))
        new = "on" if on else "off"
        if spec.state == new:
            return False
        spec.state = new
        self.changed_t[entity] = self.sim.wall()
        self.context[entity] = self._ulid()
        if spec.node:
            self.sim.set_power(spec.node, on)
        self.sim.notify()
        return True
