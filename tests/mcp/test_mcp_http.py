"""``mdsearch mcp --http``: a real server process on a free loopback port, driven by the MCP SDK's
own streamable HTTP client (Python) and by the TypeScript SDK's ``StreamableHTTPClientTransport``.

One server serves the module (the model loads once); the token file is edited by the tests, as a
team would edit it, and restored after each.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_harness import (
    EXAMPLE_VAULT,
    PYTHON,
    READY_TIMEOUT,
    install_node_client,
    server_command,
    wait_until,
)

pytestmark = pytest.mark.slow

ALICE = "alice-" + "a" * 24
BOB = "bob-" + "b" * 24
QUERY = "what do we do when more than 5% of requests fail"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PROXY = "handbook.example"
"""The name a TLS reverse proxy in front of the server sends (``--allow-host``)."""
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


class HttpServer:
    """A running ``mdsearch mcp --http 127.0.0.1:0`` and the URL it printed."""

    def __init__(self, vault: Path, tokens: Path, cache: Path, *extra: str, **popen: Any) -> None:
        self.vault, self.tokens, self.cache = vault, tokens, cache
        self.env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache)}
        self.proc = subprocess.Popen(
            server_command([vault], "--http", "127.0.0.1:0", "--token-file", str(tokens),
                           *extra),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env=self.env, **popen)
        self.stderr: list[str] = []
        self._url = threading.Event()
        self.url = ""
        threading.Thread(target=self._read, daemon=True).start()
        assert self._url.wait(120), "no 'serving' line: " + "".join(self.stderr)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            if "serving http://" in line and not self.url:
                self.url = line.split("serving ", 1)[1].split()[0]
                self._url.set()

    def post(self, body: dict[str, Any], token: str | None, **headers: str) -> httpx2.Response:
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx2.post(self.url, json=body, headers={**ACCEPT, **auth, **headers},
                           timeout=60)

    def call(self, token: str, name: str, arguments: dict[str, Any]) -> Any:
        return asyncio.run(sdk_call(self.url, token, name, arguments))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


async def sdk_call(url: str, token: str, name: str, arguments: dict[str, Any]) -> Any:
    """One tool call through the Python SDK's streamable HTTP client, as an assistant makes it."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        return await session.call_tool(name, arguments)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    tmp = tmp_path_factory.mktemp("mcp-http")
    vault = shutil.copytree(EXAMPLE_VAULT, tmp / "vault")
    tokens = tmp / "team-tokens"
    tokens.write_text(f"# the handbook's readers\nalice {ALICE}\nbob {BOB}\n", encoding="utf-8")
    tokens.chmod(0o600)
    srv = HttpServer(vault, tokens, tmp / "cache", "--allow-host", PROXY)

    def ready() -> bool:
        st = srv.call(ALICE, "index_status", {}).structured_content
        return st["index"]["state"] == "ready" and st["model"]["state"] == "loaded"

    try:
        wait_until(ready, READY_TIMEOUT, "the first index over HTTP", interval=0.5)
        yield srv
    finally:  # a failed start must not leave a server listening
        srv.stop()


@pytest.fixture
def team(server: HttpServer) -> Iterator[HttpServer]:
    original = server.tokens.read_text(encoding="utf-8")
    yield server
    server.tokens.write_text(original, encoding="utf-8")
    server.tokens.chmod(0o600)


def cli_paths(server: HttpServer, k: int) -> list[str]:
    done = subprocess.run([PYTHON, "-m", "mdsearch_ls", "search", QUERY, "--root",
                           str(server.vault), "--json", "-k", str(k)],  # asked of the server
                          env=server.env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return [r["path"] for r in json.loads(done.stdout)["results"]]


def test_no_token_or_a_wrong_one_gets_401_and_nothing_else(server: HttpServer) -> None:
    for token in (None, "not-a-member-token-at-all", ALICE[:-1]):
        res = server.post(LIST_TOOLS, token)
        assert res.status_code == 401, (token, res.status_code)
        assert "search_markdown" not in res.text
    assert server.post(LIST_TOOLS, ALICE).status_code == 200


def test_a_foreign_host_or_origin_is_refused(server: HttpServer) -> None:
    assert server.post(LIST_TOOLS, ALICE, Host="evil.example").status_code == 421
    res = server.post(LIST_TOOLS, ALICE, Origin="http://evil.example")
    assert res.status_code == 403


def test_an_allowed_host_is_admitted_with_and_without_a_port(server: HttpServer) -> None:
    for host in (PROXY, f"{PROXY}:443", f"{PROXY}:8765"):
        assert server.post(LIST_TOOLS, ALICE, Host=host).status_code == 200, host
    for origin in (f"https://{PROXY}", f"http://{PROXY}", f"http://{PROXY}:8765",
                   f"https://{PROXY}:8443"):
        assert server.post(LIST_TOOLS, ALICE, Host=PROXY, Origin=origin).status_code == 200, \
            origin
    assert server.post(LIST_TOOLS, ALICE, Host=f"{PROXY}.evil.example").status_code == 421
    assert server.post(LIST_TOOLS, ALICE, Host=PROXY,
                       Origin=f"https://{PROXY}.evil.example").status_code == 403


def test_a_revoked_member_is_refused_without_a_restart(team: HttpServer) -> None:
    team.tokens.write_text(f"bob {BOB}\n", encoding="utf-8")  # alice leaves the team
    assert team.post(LIST_TOOLS, ALICE).status_code == 401
    assert team.post(LIST_TOOLS, BOB).status_code == 200
    carol = "carol-" + "c" * 24
    team.tokens.write_text(f"bob {BOB}\ncarol {carol}\n", encoding="utf-8")
    assert team.post(LIST_TOOLS, carol).status_code == 200


def test_an_unusable_token_file_refuses_everyone(team: HttpServer) -> None:
    team.tokens.write_text("alice short\n", encoding="utf-8")  # a broken edit: fail closed
    assert team.post(LIST_TOOLS, ALICE).status_code == 401
    assert team.post(LIST_TOOLS, BOB).status_code == 401


def said_after(server: HttpServer, seen: int, words: str) -> bool:
    """Whether the server's stderr, past its first ``seen`` lines, says ``words`` (it is read
    by a thread: wait for it)."""
    return bool(wait_until(lambda: any(words in line for line in server.stderr[seen:]), 10,
                           f"the server saying {words!r}", interval=0.05))


def test_an_emptied_token_file_says_everyone_is_locked_out(team: HttpServer) -> None:
    seen = len(team.stderr)
    team.tokens.write_text("# nobody yet\n", encoding="utf-8")
    assert team.post(LIST_TOOLS, ALICE).status_code == 401
    assert said_after(team, seen, "WARNING") and said_after(team, seen, "locked out")


def test_a_token_file_others_can_read_is_warned_when_re_read(team: HttpServer) -> None:
    seen = len(team.stderr)
    team.tokens.chmod(0o644)
    assert team.post(LIST_TOOLS, ALICE).status_code == 200  # served, and said
    assert said_after(team, seen, "can be read by everyone (mode 644)")
    assert said_after(team, seen, "chmod 600")


def test_search_over_http_ranks_as_the_cli_does(server: HttpServer) -> None:
    res = server.call(BOB, "search_markdown", {"query": QUERY, "k": 5})
    assert not res.is_error
    paths = [r["path"] for r in res.structured_content["results"]]
    assert paths == cli_paths(server, 5)
    assert paths[0] == "operations/Crisis management and escalation.md"


def test_sixteen_clients_in_parallel_all_get_the_same_ranking(server: HttpServer) -> None:
    async def many() -> list[Any]:
        return await asyncio.gather(*(sdk_call(server.url, ALICE if i % 2 else BOB,
                                               "search_markdown", {"query": QUERY, "k": 5})
                                      for i in range(16)))

    results = asyncio.run(many())
    rankings = {tuple(r["path"] for r in res.structured_content["results"]) for res in results}
    assert len(rankings) == 1
    assert list(rankings.pop()) == cli_paths(server, 5)


def test_a_remote_client_sees_no_server_path(server: HttpServer) -> None:
    res = server.call(ALICE, "index_status", {})
    shown = json.dumps(res.structured_content) + res.content[0].text
    assert str(server.vault) not in shown and str(server.cache) not in shown
    assert res.structured_content["folders"][0]["name"] == "vault"


def test_tokens_never_reach_the_log(server: HttpServer) -> None:
    server.post(LIST_TOOLS, "guess-" + "g" * 24)
    server.call(ALICE, "index_status", {})
    log = "".join(server.stderr)
    assert ALICE not in log and BOB not in log and "guess-" not in log


@pytest.mark.skipif(not (shutil.which("node") and shutil.which("npm")),
                    reason="node and npm are needed for the TypeScript SDK client")
def test_the_typescript_sdk_over_http(server: HttpServer, tmp_path: Path) -> None:
    client = install_node_client(tmp_path / "client")

    def node(token: str | None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "MDSEARCH_TOKEN"}
        if token:
            env["MDSEARCH_TOKEN"] = token
        return subprocess.run(["node", "client.mjs", server.url, QUERY], cwd=client, env=env,
                              capture_output=True, text=True, timeout=300)

    done = node(BOB)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["server"]["name"] == "mdsearch" and out["isError"] is False
    assert [r["path"] for r in out["structured"]["results"]] == cli_paths(server, 3)
    refused = node("wrong-" + "w" * 24)
    assert refused.returncode != 0 and "401" in refused.stderr


# ---- the CLI as a client: mdsearch search --server URL ---------------------------------------


def cli(server: HttpServer, *args: str, token: str | None = None, cwd: Path | None = None
        ) -> subprocess.CompletedProcess[str]:
    """``mdsearch search`` as a person runs it: from the notes' folder for a local search, from
    anywhere with ``--server`` (the token in ``MDSEARCH_TOKEN``)."""
    env = {k: v for k, v in server.env.items() if k != "MDSEARCH_TOKEN"}
    if token:
        env["MDSEARCH_TOKEN"] = token
    return subprocess.run([PYTHON, "-m", "mdsearch_ls", "search", *args], cwd=cwd or server.vault,
                          env=env, capture_output=True, text=True, timeout=300)


def _without_local_paths(out: str) -> list[dict[str, Any]]:
    """jsonl hits less ``file`` (a local hit's absolute path, which a remote one cannot have)."""
    rows = [json.loads(line) for line in out.splitlines()]
    for row in rows:
        row.pop("file")
    return rows


@pytest.mark.parametrize("query", [QUERY, "backup keys", "who approves a refund tag:finance"])
def test_search_through_the_server_prints_what_a_local_search_prints(
        server: HttpServer, tmp_path: Path, query: str) -> None:
    for fmt in ("text", "vimgrep", "paths"):
        local = cli(server, query, "-k", "4", "--format", fmt, "--no-update")
        remote = cli(server, query, "-k", "4", "--format", fmt, "--server", server.url,
                     token=ALICE)
        assert local.returncode == remote.returncode == 0, remote.stderr
        assert remote.stdout == local.stdout, fmt
    local = cli(server, query, "-k", "4", "--format", "jsonl", "--no-update")
    remote = cli(server, query, "-k", "4", "--format", "jsonl", "--server", server.url,
                 token=BOB, cwd=tmp_path)  # anywhere: the notes are on the server
    assert remote.returncode == 0, remote.stderr
    assert _without_local_paths(remote.stdout) == _without_local_paths(local.stdout)
    assert str(server.vault) not in remote.stdout


def test_search_through_the_server_shows_control_characters_escaped(team: HttpServer) -> None:
    """A handbook note that would drive every member's terminal (OSC 52 writes the clipboard,
    CSI 2J clears the screen; its name too) is shown escaped by ``search --server``."""
    from tests.integration.test_terminal_safety import EVIL_NOTE, obeyed

    note = team.vault / "ev\x1b[2Jil.md"
    note.write_text(EVIL_NOTE, encoding="utf-8")
    query = "deploy runbook restart the service clipboard"
    try:
        wait_until(lambda: any("pwned" in r["text"] for r in team.call(
            ALICE, "search_markdown", {"query": query, "k": 3}).structured_content["results"]),
            60, "the server indexing the note", interval=0.5)
        for fmt in ("text", "vimgrep", "paths"):
            done = cli(team, query, "-k", "3", "--format", fmt, "--color", "always",
                       "--server", team.url, token=ALICE)
            assert done.returncode == 0, done.stderr
            assert obeyed(done.stdout) == [], fmt
            assert "ev\\x1b[2Jil.md" in done.stdout, fmt
    finally:
        note.unlink()


def test_search_through_the_server_takes_a_token_file(server: HttpServer, tmp_path: Path) -> None:
    mine = tmp_path / "my-token"
    mine.write_text(f"# mine\nalice {ALICE}\n", encoding="utf-8")
    done = cli(server, "backup keys", "--server", server.url, "--token-file", str(mine),
               "--format", "paths")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "operations/Backup and disaster recovery.md"


def test_search_through_the_server_says_why_it_was_refused(server: HttpServer,
                                                           tmp_path: Path) -> None:
    for token in (None, "wrong-" + "w" * 24):
        done = cli(server, "backup keys", "--server", server.url, token=token)
        assert done.returncode == 4 and "refused the token (401)" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and done.stdout == ""
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    done = cli(server, "backup keys", "--server", f"http://127.0.0.1:{port}", token=ALICE)
    assert done.returncode == 4 and "cannot reach" in done.stderr, done.stderr
    done = cli(server, "backup keys", "--server", server.url, "--phrase", "keys", token=ALICE)
    assert done.returncode == 2 and "--phrase" in done.stderr
    done = cli(server, "backup keys", "--server", "ftp://handbook", token=ALICE)
    assert done.returncode == 2 and "expected a URL" in done.stderr


# ---- refusals at start: a clear message, exit 2, nothing listening ---------------------------


def _start(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run(server_command([EXAMPLE_VAULT], *args), env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def test_a_network_address_without_a_token_file_is_refused(tmp_path: Path) -> None:
    done = _start(tmp_path, "--http", "0.0.0.0:0")
    assert done.returncode == 2 and "needs --token-file" in done.stderr
    assert not (tmp_path / "cache").exists(), "nothing written"


@pytest.mark.parametrize("content, why", [
    (None, "no such file"), ("", "no members"), ("# only a comment\n", "no members"),
    ("alice short\n", "shorter than 16"), ("alice\n", "two words"),
    (f"alice {ALICE}\nbob {ALICE}\n", "same token"),
])
def test_a_bad_token_file_is_refused_at_start(tmp_path: Path, content: str | None,
                                              why: str) -> None:
    tokens = tmp_path / "tokens"
    if content is not None:
        tokens.write_text(content, encoding="utf-8")
    done = _start(tmp_path, "--http", "127.0.0.1:0", "--token-file", str(tokens))
    assert done.returncode == 2 and why in done.stderr, done.stderr
    assert ALICE not in done.stderr
    assert not (tmp_path / "cache").exists()


def test_a_token_file_others_can_read_is_warned_at_start(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\n", encoding="utf-8")
    said = {}
    for mode in (0o640, 0o600):
        tokens.chmod(mode)
        with socket.socket() as busy:  # (then it stops at once, having read the file)
            busy.bind(("127.0.0.1", 0))
            busy.listen(1)
            done = _start(tmp_path, "--http", f"127.0.0.1:{busy.getsockname()[1]}",
                          "--token-file", str(tokens))
        assert done.returncode == 2, done.stderr
        said[mode] = done.stderr
    assert "WARNING" in said[0o640] and "can be read by its group (mode 640)" in said[0o640]
    assert "WARNING" not in said[0o600]


def test_a_port_in_use_is_refused_at_start(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = _start(tmp_path, "--http", f"127.0.0.1:{port}")
    assert done.returncode == 2 and "in use" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
