"""Home Assistant's REST API for the nodes' smart plugs (httpx).

Only ``GET /api/states/<entity>`` and ``POST /api/services/switch/turn_on|
turn_off`` (REFERENCE.md §3). Home Assistant answers a service call to an
``unavailable`` switch with 200 and ``[]`` and does nothing, so a switch is
checked before the call and every change is confirmed by re-reading the
entity's state until it matches; otherwise the call raises and says what
state the plug is in (no half-state is ever reported as done).

The bearer token comes from an environment variable or a file of mode 0600
(a file readable by group or others is refused). It is kept out of every
repr, message, log and journal entry: it is registered with core/redact.py,
and every body Home Assistant (or a proxy) sends back is redacted.

Manners: a refused token (401/403) is never sent again by this client — the
refusal is remembered and every later call raises it without a request, and
until one request has been accepted, requests go one at a time, so a command
that reads eight plugs sends one request to learn the token is refused (an
``ip_ban_enabled`` Home Assistant bans after a few failed logins). There are
no retries here.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx

from sparktui.adapters.endpoints import Endpoints
from sparktui.adapters.tls import client_tls
from sparktui.core.clock import Clock, SystemClock
from sparktui.core.config import Config
from sparktui.core.redact import MIN_TOKEN_CHARS, redact, register_secret

CONFIRM_POLL_S = 0.5
CONFIRM_TIMEOUT_S = 10.0


class HomeAssistantError(Exception):
    """A Home Assistant call failed; the message says what and what to do."""


class TokenError(HomeAssistantError):
    pass


class TokenMissing(TokenError):
    """Neither the variable nor the file holds a token: none is configured
    (unlike a file of the wrong mode or an empty one: a token meant, not usable)."""


class AuthRefused(HomeAssistantError):
    """Home Assistant refused the token (401) or this machine (403): the command
    ends; retrying would only get the machine banned."""


class SwitchUnavailable(HomeAssistantError):
    """The entity's state is ``unavailable`` (or ``unknown``): the plug is offline."""


class NotConfirmed(HomeAssistantError):
    """The call was accepted but the state did not change."""


class _Token:
    """Holds the token; never shows it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value
        register_secret(value)

    def header(self) -> str:
        return f"Bearer {self._value}"

    def __repr__(self) -> str:
        return "<token hidden>"

    __str__ = __repr__


def _checked(value: str, where: str, what: str) -> _Token:
    """A token of at least MIN_TOKEN_CHARS (shorter ones cannot be masked in
    every derived form, and no Home Assistant token is that short)."""
    if len(value) < MIN_TOKEN_CHARS:
        raise TokenError(f"the {what} in {where} is {len(value)} characters: "
                         f"too short to be a long-lived access token (they are ~180) or to "
                         f"be kept out of output reliably (at least {MIN_TOKEN_CHARS}) -> "
                         f"create a long-lived access token (profile page, Security tab)")
    return _Token(value)


def load_token(env_var: str, token_file: str | Path, *,
               what: str = "Home Assistant token") -> _Token:
    """The token from ``env_var``, else from ``token_file`` (mode 0600 or stricter).
    ``what`` names it in errors (the browser view's token is loaded the same way)."""
    value = os.environ.get(env_var, "").strip() if env_var else ""
    if value:
        return _checked(value, f"${env_var}", what)
    path = Path(token_file).expanduser()
    try:
        st = path.stat()
    except FileNotFoundError:
        raise TokenMissing(f"no {what}: ${env_var} is unset and {path} does not "
                         f"exist -> put a long-lived access token in {path} (chmod 600)") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenError(f"{path} has mode {stat.S_IMODE(st.st_mode):04o}: a token file must "
                         f"not be readable by group or others -> chmod 600 {path}")
    value = path.read_text().strip()
    if not value:
        raise TokenError(f"{path} is empty -> put the {what} in it")
    return _checked(value, str(path), what)


@dataclass(frozen=True)
class SwitchState:
    entity: str
    state: str
    """on, off, unavailable, unknown."""
    last_changed: str = ""

    @property
    def available(self) -> bool:
        return self.state in ("on", "off")

    @property
    def powered(self) -> bool | None:
        """Is the plug on; None while it is unavailable or unknown."""
        return self.state == "on" if self.available else None


class HomeAssistant:
    """One Home Assistant instance. Use as an async context manager."""

    def __init__(self, url: str, token: _Token, *, timeout_s: float = 10.0,
                 clock: Clock | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 entity_keys: dict[str, str] | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.clock = clock or SystemClock()
        self.entity_keys = dict(entity_keys or {})
        """entity -> the config key that names it (``nodes.dgx6.switch``), for 404s."""
        self._token = token
        self._refused = ""
        """Why the token was refused; once set, no request is sent again."""
        self._accepted = False
        self._gate = asyncio.Lock()
        self._client = httpx.AsyncClient(base_url=self.url, timeout=timeout_s,
                                         transport=transport, trust_env=False,
                                         verify=client_tls())

    def __repr__(self) -> str:
        return f"HomeAssistant({self.url!r})"

    async def __aenter__(self) -> HomeAssistant:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _request(self, method: str, path: str, json: object | None = None) -> httpx.Response:
        if self._refused:
            raise AuthRefused(self._refused)
        if self._accepted:
            return await self._send(method, path, json)
        async with self._gate:  # one at a time until the token is known to be accepted
            if self._refused:
                raise AuthRefused(self._refused)
            return await self._send(method, path, json)

    async def _send(self, method: str, path: str, json: object | None) -> httpx.Response:
        headers = {"Authorization": self._token.header(), "Content-Type": "application/json"}
        what = f"{method} {self.url}{path}"
        try:
            response = await self._client.request(method, path, json=json, headers=headers)
        except httpx.TimeoutException:
            raise HomeAssistantError(f"{what}: no answer within {self.timeout_s:g} s -> is "
                                     f"Home Assistant at {self.url} up and reachable? "
                                     f"([home_assistant] url, timeout_s)") from None
        except httpx.TransportError as exc:
            raise HomeAssistantError(f"{what}: {_transport_problem(exc, self.url)}") from None
        status = response.status_code
        if status in (401, 403):
            self._refused = (
                f"{what}: 401 Unauthorized: Home Assistant refused the token -> create a new "
                f"long-lived access token (profile page, Security tab) and put it in the "
                f"token file or variable; not retried"
                if status == 401 else
                f"{what}: 403 Forbidden: Home Assistant refused this machine (banned after "
                f"failed logins? see ip_bans.yaml in its config folder) -> remove the ban, "
                f"check the token, restart Home Assistant; not retried")
            raise AuthRefused(self._refused)
        self._accepted = True
        if status == 404 and path.startswith("/api/states/"):
            entity = path.removeprefix("/api/states/")
            key = self.entity_keys.get(entity)
            where = f" -> check {key} in config.toml" if key else ""
            raise HomeAssistantError(f"{what}: 404: Home Assistant has no entity {entity}"
                                     f"{where} (the entity id is on its Settings > Entities "
                                     f"page)")
        if status >= 400:
            body = redact(response.text.strip())[:200]
            hint = ""
            if status == 400 and path.startswith("/api/services/notify/"):
                # what Home Assistant answers for a notify service it lacks (issue 30)
                hint = (f" -> does Home Assistant have notify."
                        f"{path.removeprefix('/api/services/notify/')}? `sparktui check` "
                        f"lists the notify services it has ([notify] service)")
            raise HomeAssistantError(f"{what}: HTTP {status}: {body}{hint}")
        return response

    async def state(self, entity: str) -> SwitchState:
        response = await self._request("GET", f"/api/states/{_entity(entity)}")
        try:
            data = response.json()
            return SwitchState(str(data["entity_id"]), str(data["state"]),
                               str(data.get("last_changed", "")))
        except (ValueError, KeyError, TypeError):
            raise HomeAssistantError(f"GET /api/states/{entity}: not a state object: "
                                     f"{redact(response.text[:200])!r}") from None

    async def turn(self, entity: str, on: bool, *, confirm_timeout_s: float = CONFIRM_TIMEOUT_S,
                   poll_s: float = CONFIRM_POLL_S) -> SwitchState:
        """Switch ``entity`` and confirm by re-reading its state.

        Raises SwitchUnavailable before any call when the plug is offline,
        NotConfirmed when the state does not follow within ``confirm_timeout_s``.
        """
        wanted = "on" if on else "off"
        before = await self.state(entity)
        if not before.available:
            raise SwitchUnavailable(f"{entity} is {before.state} in Home Assistant (the plug is "
                                    f"offline or not paired): nothing was switched -> check the "
                                    f"plug, then retry")
        if before.state == wanted:
            return before
        service = "turn_on" if on else "turn_off"
        await self._request("POST", f"/api/services/switch/{service}", {"entity_id": entity})
        deadline = self.clock.monotonic() + confirm_timeout_s
        reads = 0
        while True:
            now = await self.state(entity)
            reads += 1
            if now.state == wanted:
                return now
            if self.clock.monotonic() >= deadline and reads >= 3:
                raise NotConfirmed(f"{entity}: {service} was accepted but the plug still reads "
                                   f"{now.state} after {confirm_timeout_s:g} s -> check the plug")
            await self.clock.sleep(poll_s)

    async def notify(self, service: str, title: str, message: str, *, tag: str = "") -> None:
        """Call a ``notify.*`` service (the operator's phone); same manners as
        the plug calls (timeout, a refused token never retried, body redacted).
        ``tag``: messages of one incident replace each other where the platform
        has such a key (the companion app's ``data.tag``, a persistent
        notification's ``notification_id``); other platforms get no ``data``,
        whose keys each validates its own way."""
        domain, _, name = service.partition(".")
        if domain != "notify" or not name or not all(c.isalnum() or c == "_" for c in name):
            raise HomeAssistantError(f"not a notify service: {service!r}")
        body: dict[str, object] = {"title": title, "message": message}
        if tag and name.startswith("mobile_app_"):
            body["data"] = {"tag": tag}
        elif tag and name == "persistent_notification":
            body["data"] = {"notification_id": tag}
        await self._request("POST", f"/api/services/notify/{name}", body)


    async def services(self, domain: str) -> list[str]:
        """The services of ``domain`` Home Assistant has (``GET /api/services``),
        as ``domain.name``: whether a configured notify service exists."""
        response = await self._request("GET", "/api/services")
        try:
            found = [f"{domain}.{name}" for d in response.json()
                     if d.get("domain") == domain for name in d.get("services", {})]
        except (ValueError, AttributeError, TypeError):
            raise HomeAssistantError(f"GET /api/services: not a service list: "
                                     f"{redact(response.text[:200])!r}") from None
        return sorted(found)


class PlugStates(Protocol):
    async def state(self, entity: str) -> SwitchState: ...


def plug_power_source(plugs: PlugStates, entities: dict[str, str]
                      ) -> Callable[[str], Awaitable[SwitchState | None]]:
    """A poller PowerSource over anything that reads plug states: node name ->
    its plug's state (None for a node without a plug)."""

    async def powered(node: str) -> SwitchState | None:
        entity = entities.get(node)
        if not entity:
            return None
        return await plugs.state(entity)

    return powered


def _transport_problem(exc: httpx.TransportError, url: str) -> str:
    """What went wrong connecting to `url` and what to check (no exception repr)."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__ or cause.__context__
    if isinstance(cause, socket.gaierror) or "name resolution" in str(exc).lower() \
            or "name or service not known" in str(exc).lower():
        return (f"cannot resolve the host of {url} -> check [home_assistant] url "
                f"(spelling, DNS)")
    if isinstance(cause, ConnectionRefusedError) or "refused" in str(exc).lower() \
            or "all connection attempts failed" in str(exc).lower():
        return (f"connection refused at {url} -> is Home Assistant running and listening "
                f"there? check [home_assistant] url (host and port)")
    detail = redact(str(exc)) or type(exc).__name__
    return f"cannot talk to {url} ({detail}) -> check [home_assistant] url and the network"


def _entity(entity: str) -> str:
    domain, _, name = entity.partition(".")
    if not domain or not name or not all(c.isalnum() or c in "._" for c in entity):
        raise HomeAssistantError(f"not an entity id: {entity!r}")
    return entity


def open_home_assistant(config: Config, endpoints: Endpoints, *,
                        clock: Clock | None = None) -> HomeAssistant:
    """The Home Assistant of `config`. With the simulator: its URL and only its own
    token file, so a real token in the environment is never sent to it.
    Raises TokenError (whose message never holds the token)."""
    ha = config.home_assistant
    if endpoints.simulated:
        token = load_token("", endpoints.ha_token_file)
    else:
        token = load_token(ha.token_env, ha.token_file)
    keys = {n.switch: f"nodes.{n.name}.switch" for n in config.nodes.values()}
    keys |= {s.entity: f"switches.{s.name}.entity" for s in config.switches.values()}
    return HomeAssistant(endpoints.ha_url, token, timeout_s=ha.timeout_s, clock=clock,
                         entity_keys=keys)
