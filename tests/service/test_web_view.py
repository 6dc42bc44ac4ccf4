"""`sparktui web` in a real headless browser (Debian's chromium): the page shows
the read-only console attached to the sentinel (the node names are on screen,
the serve/stop/power keys are not, and pressing them opens nothing), loads
nothing from outside the server, and a token, when configured, is required of
every request; without one a non-loopback address is refused before anything
listens, and without a sentinel the view does not start."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from .cdp import Chromium, chromium_binary
from .simnight import ROOT, sentinel_process, state_in

SCREENSHOT = ROOT / "screenshots" / "web-read-only-1280x800.png"


def last_line(screen: str) -> str:
    lines = screen.strip().splitlines()
    return lines[-1].strip() if lines else ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def watched(sp: object) -> AsyncIterator[None]:
    """Until the sentinel says consoles may attach, then its output drained
    (a full pipe would stop the sentinel at its next line)."""
    stdout = sp.proc.stdout  # type: ignore[attr-defined]
    assert stdout is not None
    async with asyncio.timeout(60):
        while "consoles attach" not in (await stdout.readline()).decode():
            pass

    async def drain() -> None:
        while await stdout.read(65536):
            pass

    task = asyncio.create_task(drain())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@contextlib.asynccontextmanager
async def web(config: Path, *args: str, env: dict[str, str] | None = None
              ) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sparktui", "--config", str(config), "web", *args, env=environ,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(60):
            first = (await proc.stdout.readline()).decode()
        yield proc, first
    finally:
        if proc.returncode is None:
            proc.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), 15)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def run(config: Path, *args: str) -> tuple[int, str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    environ.pop("SPARKTUI_WEB_TOKEN", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sparktui", "--config", str(config), "web", *args, env=environ,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    return int(proc.returncode or 0), err.decode()


@pytest.mark.timeout(240)
async def test_the_browser_shows_the_read_only_console_of_the_sentinel(
        tmp_path: Path, config_copy: Callable[..., Path]) -> None:
    chromium_binary()
    config = config_copy(lambda t: state_in(tmp_path)(t) + (
        f'\n[web]\ntoken_file = "{tmp_path / "no-token"}"\n'))
    port = free_port()
    code, err = await run(config, "--listen", f"127.0.0.1:{port}")
    assert code == 2 and "no sentinel watches" in err  # no browser session may poll itself
    async with sentinel_process(tmp_path, config) as sp, watched(sp), \
            web(config, "--listen", f"127.0.0.1:{port}",
                env={"SPARKTUI_WEB_TOKEN": ""}) as (_, first), \
            Chromium(tmp_path / "profile") as browser:
            assert f"at http://127.0.0.1:{port}/ (loopback, no token)" in first
            # no other site's page through the operator's browser: a websocket from
            # another origin (hijacking), a name rebound to 127.0.0.1 (DNS rebinding)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                         timeout=10) as client:
                assert (await client.get("/")).status_code == 200
                assert (await client.get("/", headers={"Host": f"rebound.example:{port}"})
                        ).status_code == 403
                upgrade = {"Connection": "Upgrade", "Upgrade": "websocket",
                           "Sec-WebSocket-Version": "13",
                           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
                hijack = await client.get("/ws", headers={**upgrade,
                                                          "Origin": "https://evil.example"})
                assert hijack.status_code == 403, hijack.status_code
                assert (await client.get("/", headers={"Origin": f"https://127.0.0.1:{port}"})
                        ).status_code == 200  # its own host (behind a TLS proxy: https)
            await browser.call("Page.enable")
            await browser.call("Network.enable")
            await browser.call("Page.navigate", url=f"http://127.0.0.1:{port}/")
            text = ""
            async with asyncio.timeout(90):
                while not all(n in text for n in sp.config.nodes) or "attached" not in text:
                    await asyncio.sleep(0.5)
                    text = await browser.screen_text()
            assert "READ-ONLY" in text and "attached to sentinel" in text
            await browser.screenshot(tmp_path / "web.png")  # the nodes pane, as a browser shows it
            if os.environ.get("SPARKTUI_WRITE_SCREENSHOTS"):
                SCREENSHOT.write_bytes((tmp_path / "web.png").read_bytes())
            footer = last_line(text)
            for word in ("Serve", "Stop", "Power", "Recover"):
                assert word.lower() not in footer.lower(), footer
            for key in ("s", "x", "P", "R"):  # the action keys do nothing here
                await browser.key(key)
            await asyncio.sleep(1.0)
            after = await browser.screen_text()
            assert last_line(after) == footer  # no modal's footer
            await browser.key("?")  # the control: keys do reach the console
            async with asyncio.timeout(60):
                while "sparktui — keys (read-only)" not in await browser.screen_text():
                    await asyncio.sleep(0.3)
            resources = await browser.evaluate(
                "performance.getEntriesByType('resource').map(e => e.name)")
            assert resources and all(r.startswith(f"http://127.0.0.1:{port}/")
                                     or r.startswith(f"ws://127.0.0.1:{port}/")
                                     for r in resources), resources
            # the sentinel away (systemd restarts it 15 s later): a page opened now is
            # a console that says so and waits for it, not a session that died
            sp.proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(sp.proc.wait(), 30)
            await browser.call("Page.navigate", url=f"http://127.0.0.1:{port}/")
            text = ""
            try:
                async with asyncio.timeout(60):
                    while "no sentinel answers at" not in text:
                        await asyncio.sleep(0.5)
                        text = await browser.screen_text()
            except TimeoutError:
                raise AssertionError(text) from None
            assert "READ-ONLY" in text and "SENTINEL LOST" in text, text


async def test_a_non_loopback_address_needs_a_token(tmp_path: Path,
                                                    config_copy: Callable[..., Path]) -> None:
    config = config_copy(lambda t: state_in(tmp_path)(t) + (
        f'\n[web]\ntoken_file = "{tmp_path / "no-token"}"\n'))
    code, err = await run(config, "--listen", "0.0.0.0:8765")
    assert code == 2
    assert "0.0.0.0:8765 is not a loopback address and there is no token" in err
    code, err = await run(config, "--listen", "127.0.0.1:http")
    assert code == 2 and "--listen" in err and "Traceback" not in err
    # a token meant but not usable is no reason to serve without one, even on loopback
    (tmp_path / "no-token").write_text("web-token-0123456789abcdef\n")
    (tmp_path / "no-token").chmod(0o644)
    code, err = await run(config, "--listen", "127.0.0.1:8765")
    assert code == 2 and "has mode 0644" in err and "chmod 600" in err
    assert "web-token-0123456789abcdef" not in err


async def test_a_configured_token_is_required_of_every_request(
        tmp_path: Path, config_copy: Callable[..., Path]) -> None:
    token = "web-token-0123456789abcdef"
    config = config_copy(state_in(tmp_path))
    port = free_port()
    async with sentinel_process(tmp_path, config) as sp, watched(sp), \
            web(config, "--listen", f"127.0.0.1:{port}",
                env={"SPARKTUI_WEB_TOKEN": token}) as (proc, first):
            assert "(with its token)" in first and token not in first
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=base, timeout=10) as client:
                assert (await client.get("/")).status_code == 401
                assert (await client.get("/", params={"token": "wrong"})).status_code == 401
                assert (await client.get("/ws")).status_code == 401
                assert (await client.get("/static/js/textual.js")).status_code == 401
                ok = await client.get("/", params={"token": token, "fontsize": "14"})
                # the cookie from now on, and an address without the token
                assert ok.status_code == 303 and ok.headers["location"] == "/?fontsize=14"
                cookie = ok.headers["set-cookie"]
                assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
                page = await client.get(ok.headers["location"])
                assert page.status_code == 200 and "googleapis" not in page.text
                assert token not in page.text
                assert (await client.get("/static/js/textual.js")).status_code == 200  # cookie
                # the page's addresses are the ones the browser used, not the listen
                # address (0.0.0.0 or :: is none to a browser)
                named = await client.get("/", headers={"Host": f"spark-head.example:{port}"})
                assert f'data-session-websocket-url="ws://spark-head.example:{port}/ws"' \
                    in named.text
                assert f"http://spark-head.example:{port}/static/js/textual.js" in named.text
                proxied = await client.get("/", headers={"Host": "spark-head.example",
                                                         "X-Forwarded-Proto": "https"})
                assert 'data-session-websocket-url="wss://spark-head.example/ws"' in proxied.text
                assert "https://spark-head.example/static/js/textual.js" in proxied.text
            proc.terminate()
            out, err = await asyncio.wait_for(proc.communicate(), 15)
            assert token not in (out + err).decode()  # no access log with ?token=
