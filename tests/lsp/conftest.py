"""End-to-end fixtures: a real ``python -m mdsearch_ls serve`` process over stdio, real model.

Model loading costs ~10 s per process, so the main server is session-scoped (one per client
profile) and tests that change notes only touch notes they created themselves. Every server
gets its own copy of ``tests/fixtures/lsp-vault`` and its own ``MDSEARCH_CACHE_DIR``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pytest_lsp import ClientServerConfig, client_capabilities
from pytest_lsp.client import make_test_lsp_client

REPO = Path(__file__).resolve().parents[2]
LSP_VAULT = REPO / "tests" / "fixtures" / "lsp-vault"
TLDR = REPO.parent / "shared" / "corpora" / "tldr" / "pages" / "common"
PYTHON = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv").exists() else sys.executable
SERVER_CMD = [PYTHON, "-m", "mdsearch_ls", "serve"]
PROFILES = ["visual-studio-code", "neovim"]
READY_TIMEOUT = 180.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """One event loop for the whole LSP suite, so session-scoped servers can be shared."""
    here = Path(__file__).parent
    marker = pytest.mark.asyncio(loop_scope="session")
    for item in items:
        if here in Path(str(item.fspath)).parents and asyncio.iscoroutinefunction(
            getattr(item, "function", None)
        ):
            item.add_marker(marker, append=False)


def copy_vault(dest: Path, source: Path = LSP_VAULT) -> Path:
    shutil.copytree(source, dest)
    return dest


def copy_tldr(dest: Path, count: int) -> Path:
    dest.mkdir(parents=True)
    for page in sorted(TLDR.glob("*.md"))[:count]:
        shutil.copy(page, dest / page.name)
    return dest


def make_client() -> LanguageClient:
    client = make_test_lsp_client()
    client.status_notes = []  # type: ignore[attr-defined]

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register_capability(ls: LanguageClient, params: types.RegistrationParams) -> None:
        ls.registrations = getattr(ls, "registrations", []) + list(params.registrations)  # type: ignore[attr-defined]
        return None

    @client.feature("mdsearch/status")
    def status_note(ls: LanguageClient, params: Any) -> None:
        ls.status_notes.append(params)  # type: ignore[attr-defined]

    return client


@dataclass
class Server:
    """A started, initialized server and what it told us on the way."""

    client: LanguageClient
    roots: list[Path]
    profile: str
    init_seconds: float = 0.0
    init_result: types.InitializeResult | None = None
    stopped: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return self.roots[0]

    def uri(self, rel: str, root: Path | None = None) -> str:
        return ((root or self.root) / rel).as_uri()

    async def command(self, name: str, *args: Any) -> Any:
        return await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=name, arguments=list(args))
        )

    async def status(self) -> dict[str, Any]:
        return await self.command("mdsearch.status")

    async def search(self, query: str, **kw: Any) -> list[dict[str, Any]]:
        return await self.command("mdsearch.search", {"query": query, **kw})

    async def symbols(self, query: str) -> list[types.WorkspaceSymbol]:
        result = await self.client.workspace_symbol_async(types.WorkspaceSymbolParams(query=query))
        return list(result or [])

    async def wait_ready(self, timeout: float = READY_TIMEOUT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            st = await self.status()
            if (
                st["state"] == "ready"
                and st["folders"]
                and all(f["state"] == "ready" and f["queue"] == 0 for f in st["folders"])
            ):
                return st
            if time.monotonic() > deadline:
                raise AssertionError(f"server not ready after {timeout}s: {st}")
            await asyncio.sleep(0.25)

    async def wait_for(self, check, timeout: float = 60.0, interval: float = 0.3) -> Any:
        """Poll an async ``check()`` until it returns something truthy."""
        deadline = time.monotonic() + timeout
        while True:
            value = await check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout}s (last: {value!r})")
            await asyncio.sleep(interval)

    def progress_ends(self) -> list[str]:
        return [
            v.message or ""
            for values in self.client.progress_reports.values()
            for v in values
            if isinstance(v, types.WorkDoneProgressEnd)
        ]

    def progress_begins(self) -> list[types.WorkDoneProgressBegin]:
        return [
            v
            for values in self.client.progress_reports.values()
            for v in values
            if isinstance(v, types.WorkDoneProgressBegin)
        ]

    async def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.client.shutdown_session(), timeout=20)
        await self.client.stop()


async def start_server(
    roots: list[Path],
    cache_dir: Path,
    *,
    profile: str = "visual-studio-code",
    init_options: dict[str, Any] | None = None,
    configuration: dict[str, Any] | None = None,
    scoped: dict[Path, dict[str, Any]] | None = None,
    process_id: int | None = None,
) -> Server:
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache_dir), "ANONYMIZED_TELEMETRY": "False"}
    config = ClientServerConfig(server_command=SERVER_CMD, client_factory=make_client,
                                server_env=env)
    t0 = time.monotonic()
    client = await config.start()
    if configuration is not None:
        client.set_configuration(configuration, section="mdsearch")
    for root, values in (scoped or {}).items():
        client.set_configuration({"mdsearch": values}, scope_uri=root.as_uri())
    result = await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities(profile),
            process_id=process_id,
            root_uri=roots[0].as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=r.as_uri(), name=r.name) for r in roots],
            initialization_options=init_options,
        )
    )
    server = Server(client=client, roots=roots, profile=profile,
                    init_seconds=time.monotonic() - t0, init_result=result)
    return server


MAIN_OPTIONS = {"maxResults": 3}


@pytest_asyncio.fixture(scope="session", loop_scope="session", params=PROFILES)
async def main(request: pytest.FixtureRequest,
               tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Server]:
    """The shared server over a copy of the fixture vault, once per client profile."""
    base = tmp_path_factory.mktemp(f"main-{request.param}")
    vault = copy_vault(base / "vault")
    server = await start_server([vault], base / "cache", profile=request.param,
                                init_options=MAIN_OPTIONS)
    server.extra["ready"] = await server.wait_ready()
    yield server
    await server.stop()


ALT_OPTIONS = {"documentSymbols": False, "hover": {"minScore": 0.99}, "chunkSize": "big",
               "maxResults": 7}


async def _alt_server(base: Path) -> Server:
    vault = copy_vault(base / "vault")
    server = await start_server([vault], base / "cache", init_options=ALT_OPTIONS)
    server.extra["ready"] = await server.wait_ready()
    return server


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def alt(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Server]:
    """A server with no outline, a strict hover threshold and two invalid settings. Shared:
    tests only read from it."""
    server = await _alt_server(tmp_path_factory.mktemp("alt"))
    yield server
    await server.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def alt_own(tmp_path: Path) -> AsyncIterator[Server]:
    """The alt server, for one test alone: for tests that change its settings."""
    server = await _alt_server(tmp_path)
    yield server
    await server.stop()
