"""A headless Chromium (Debian's chromium; .ci/run installs it) driven over the
DevTools protocol with aiohttp, for the browser-view tests. It is kept on
loopback whatever a page asks: every name resolves to nothing, every request
that is not to 127.0.0.1 goes to a closed loopback proxy, background services
(updates, sync, pings) are off. WebGL is off so xterm.js draws with its DOM
renderer, whose rows the test can read."""

from __future__ import annotations

import asyncio
import base64
import os
import re
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

LOOPBACK_ONLY = (
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=127.0.0.1",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--no-first-run", "--no-pings",
)


def chromium_binary() -> str:
    for name in ("chromium", "chromium-browser"):
        if (found := shutil.which(name)) is not None:
            return found
    if os.environ.get("CI"):
        pytest.fail("chromium is missing: .ci/run installs Debian's chromium package")
    pytest.skip("chromium is not installed (.ci/run installs Debian's chromium)")


class Chromium:
    def __init__(self, profile: Path) -> None:
        self.profile = profile
        self._n = 0

    async def __aenter__(self) -> Chromium:
        self.proc = await asyncio.create_subprocess_exec(
            chromium_binary(), "--headless=new", "--no-sandbox", "--disable-gpu",
            "--disable-webgl", "--disable-3d-apis", *LOOPBACK_ONLY,
            f"--user-data-dir={self.profile}", "--window-size=1280,800",
            "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        assert self.proc.stderr is not None
        async with asyncio.timeout(60):
            while True:
                line = (await self.proc.stderr.readline()).decode()
                if not line:
                    raise RuntimeError("chromium ended before its DevTools port opened")
                if m := re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line):
                    break
        self.session = aiohttp.ClientSession()
        async with self.session.get(f"http://127.0.0.1:{m.group(1)}/json/list") as r:
            pages = [t for t in await r.json() if t["type"] == "page"]
        self.ws = await self.session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        return self

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._n += 1
        n = self._n
        await self.ws.send_json({"id": n, "method": method, "params": params})
        async with asyncio.timeout(30):
            while True:
                msg = await self.ws.receive_json()
                if msg.get("id") == n:
                    if "error" in msg:
                        raise RuntimeError(f"{method}: {msg['error']}")
                    return dict(msg["result"])

    async def evaluate(self, expression: str) -> Any:
        result = await self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    async def screen_text(self) -> str:
        """The terminal's rows as xterm.js's DOM renderer drew them."""
        return str(await self.evaluate(
            "Array.from(document.querySelectorAll('.xterm-rows')).map(e => e.innerText)"
            ".join('\\n')") or "")

    async def key(self, text: str) -> None:
        """Type one printable key into the terminal (xterm.js reads its textarea)."""
        await self.evaluate("document.querySelector('.xterm-helper-textarea')?.focus()")
        await self.call("Input.insertText", text=text)

    async def screenshot(self, path: Path) -> None:
        shot = await self.call("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))

    async def __aexit__(self, *exc: object) -> None:
        await self.ws.close()
        await self.session.close()
        self.proc.terminate()
        try:
            async with asyncio.timeout(15):
                await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
