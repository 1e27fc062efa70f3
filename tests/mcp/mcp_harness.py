"""A real ``mdsearch mcp`` process driven by the MCP SDK's own client (``ClientSession`` over
``stdio_client``), usable from plain synchronous tests.

The client runs on an event loop in a thread of its own, so one server can be shared by every
test of a session (the model loads once) without tying tests to an asyncio loop scope. This
module is imported by the test modules (``tests/mcp`` has no ``__init__.py`` and no
``conftest.py``: either would make pytest import a package named ``mcp`` and hide the SDK).
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_VAULT = REPO / "examples" / "vault"
PYTHON = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv").exists() else sys.executable
READY_TIMEOUT = 400.0


NODE_CLIENT = Path(__file__).resolve().parent / "node"


def install_node_client(dest: Path) -> Path:
    """The TypeScript SDK client (``node/client.mjs``) installed with ``npm ci`` from its
    committed lockfile into ``dest``; returns the folder to run ``node client.mjs`` in."""
    import shutil
    import subprocess

    dest.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json", "client.mjs"):
        shutil.copy(NODE_CLIENT / name, dest / name)
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=dest,
                   check=True, timeout=600)
    return dest


def server_command(roots: list[Path], *extra: str) -> list[str]:
    args = [PYTHON, "-m", "mdsearch_ls", "mcp"]
    for r in roots:
        args += ["--root", str(r)]
    return [*args, *extra]


def wait_until(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``check()`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s (last: {last!r})")
        time.sleep(interval)


class McpClient:
    """One server process and an initialized SDK session to it."""

    def __init__(self, roots: list[Path], cache: Path, *extra: str, log: Path,
                 command: list[str] | None = None, env: dict[str, str] | None = None) -> None:
        """``command``: the whole command line to start instead of :func:`server_command`'s
        (as a client's configuration names it); ``env``: variables on top of this process's."""
        self.roots = roots
        self.log_path = log
        env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "ANONYMIZED_TELEMETRY": "False",
               **(env or {})}
        cmd = command or server_command(roots, *extra)
        self.params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=env)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True,
                                       name="mcp-test-client")
        self.thread.start()
        self.session: ClientSession | None = None
        self.init_result: Any = None
        self.init_seconds = 0.0
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Future[Any] = asyncio.run_coroutine_threadsafe(self._serve(),
                                                                           self.loop)
        if not self._ready.wait(120):
            raise AssertionError("the MCP server did not answer initialize within 120 s")
        if self._error is not None:
            raise self._error

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        try:
            with open(self.log_path, "a", encoding="utf-8") as errlog:
                t0 = time.monotonic()
                async with (stdio_client(self.params, errlog=errlog) as (read, write),
                            ClientSession(read, write) as session):
                    self.init_result = await session.initialize()
                    self.init_seconds = time.monotonic() - t0
                    self.session = session
                    self._ready.set()
                    await self._stop.wait()
        except BaseException as exc:  # reported to the test thread
            self._error = exc
        finally:
            self._ready.set()

    def run(self, fn: Callable[[ClientSession], Awaitable[Any]], timeout: float = 180.0) -> Any:
        assert self.session is not None
        session = self.session
        return asyncio.run_coroutine_threadsafe(fn(session), self.loop).result(timeout)

    def call(self, name: str, arguments: dict[str, Any] | None = None,
             timeout: float = 180.0) -> Any:
        return self.run(lambda s: s.call_tool(name, arguments or {}), timeout)

    def text(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        result = self.call(name, arguments)
        return result.content[0].text

    def status(self) -> dict[str, Any]:
        return self.call("index_status").structured_content

    def ready(self) -> bool:
        st = self.status()
        return (st["index"]["state"] == "ready" and st["model"]["state"] == "loaded"
                and all(f["queue"] == 0 for f in st["folders"]))

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> dict[str, Any]:
        wait_until(self.ready, timeout, "index ready and model loaded", interval=0.5)
        return self.status()

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def close(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        try:
            self._task.result(60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


def start(tmp: Path, roots: list[Path], *extra: str, cache: Path | None = None,
          command: list[str] | None = None, env: dict[str, str] | None = None) -> McpClient:
    return McpClient(roots, cache or tmp / "cache", *extra, log=tmp / "server.log",
                     command=command, env=env)
