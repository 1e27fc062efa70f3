"""What one client without a token can cost ``mdsearch mcp --http`` (issue 58): a real server
process, started at the open-file limit systemd gives a service (1,024), attacked over real
loopback sockets from 127.0.0.2 while a member searches from 127.0.0.1.

Each attack is bounded (connections, bytes, seconds) and stays on loopback. Before the limits,
a silent or trickling connection was never closed, 1,100 of them made every member's request
time out, and four ~100 MB headers took the server from 271 to 701 MB."""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from mcp_harness import EXAMPLE_VAULT, READY_TIMEOUT, wait_until
from test_mcp_http import ALICE, QUERY, HttpServer

pytestmark = pytest.mark.slow

OPEN_FILES = 1024
PROMPT_S = 3.0
"""A member's search through the SDK takes well under a second here; an attack that starves the
server makes it time out (or, for the headers, take 5-7 s)."""
CLOSED_WITHIN_S = 20.0
"""The server's request deadline is 10 s."""


def _lower_open_files() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, hard))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    import shutil

    tmp = tmp_path_factory.mktemp("mcp-http-limits")
    vault = shutil.copytree(EXAMPLE_VAULT, tmp / "vault")
    tokens = tmp / "team-tokens"
    tokens.write_text(f"alice {ALICE}\n", encoding="utf-8")
    tokens.chmod(0o600)
    srv = HttpServer(vault, tokens, tmp / "cache", preexec_fn=_lower_open_files)
    try:
        def ready() -> bool:
            st = srv.call(ALICE, "index_status", {}).structured_content
            return st["index"]["state"] == "ready" and st["model"]["state"] == "loaded"

        wait_until(ready, READY_TIMEOUT, "the first index over HTTP", interval=0.5)
        yield srv
    finally:
        srv.stop()


def member_search(server: HttpServer) -> float:
    """Seconds a member's search takes (through the SDK, a new connection)."""
    t0 = time.perf_counter()
    res = server.call(ALICE, "search_markdown", {"query": QUERY, "k": 3})
    assert not res.is_error and res.structured_content["results"]
    return time.perf_counter() - t0


def address(server: HttpServer) -> tuple[str, int]:
    url = urlsplit(server.url)
    return url.hostname or "", url.port or 0


def attacker(server: HttpServer, source: str = "127.0.0.2") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.connect(address(server))
    return sock


def closed_after(sock: socket.socket, trickle: bytes = b"", limit: float = CLOSED_WITHIN_S
                 ) -> float | None:
    """Seconds until the server closed ``sock`` (sending ``trickle`` a byte every half second
    meanwhile), or None when it was still open after ``limit``."""
    t0 = time.monotonic()
    sock.settimeout(0.5)
    sent = 0
    while time.monotonic() - t0 < limit:
        try:
            if sent < len(trickle):
                sock.send(trickle[sent:sent + 1])
                sent += 1
            if sock.recv(4096) == b"":
                return time.monotonic() - t0
        except TimeoutError:
            continue
        except OSError:  # reset, broken pipe: closed
            return time.monotonic() - t0
    return None


def test_a_request_that_does_not_arrive_is_closed(server: HttpServer) -> None:
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    kinds = {"silent": b"", "half a request line": b"POST /mc", "slowloris": head}
    closed: dict[str, float | None] = {}

    def attack(kind: str) -> None:
        sock = attacker(server)
        if kind == "half a request line":
            sock.sendall(kinds[kind])
        try:
            closed[kind] = closed_after(sock, kinds[kind] if kind == "slowloris" else b"")
        finally:
            sock.close()

    threads = [threading.Thread(target=attack, args=(k,)) for k in kinds]
    for t in threads:
        t.start()
    took = member_search(server)
    for t in threads:
        t.join()
    assert all(closed.get(k) is not None for k in kinds), closed
    assert took < PROMPT_S


@pytest.mark.parametrize("addresses", [1, 20], ids=["one-address", "twenty-addresses"])
def test_a_thousand_idle_connections_leave_members_served(server: HttpServer,
                                                          addresses: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    logged = len(server.stderr)
    socks: list[socket.socket] = []
    try:
        for n in range(1100):
            with contextlib.suppress(OSError):  # refused or reset at once: the limit at work
                socks.append(attacker(server, f"127.0.0.{2 + n % addresses}"))
        took = [member_search(server) for _ in range(3)]
    finally:
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert max(took) < PROMPT_S, took
    said = server.stderr[logged:]
    assert any("refused a connection" in line or "to make room" in line for line in said)
    assert len(said) < 20, said[:30]  # a line per kind per 10 s, not one per connection
    assert not any("out of system resource" in line for line in said), said


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_huge_header_costs_the_server_a_few_kilobytes(server: HttpServer) -> None:
    before = rss_mb(server.proc.pid)
    peak = [before]
    sent: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak.append(rss_mb(server.proc.pid))
            time.sleep(0.05)

    def bomb() -> None:
        sock = attacker(server)
        chunk, total = b"a" * 65536, 0
        try:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ")
            while total < 100 * 1024 * 1024:
                sock.sendall(chunk)
                total += len(chunk)
        except OSError:  # the server closed it
            pass
        finally:
            sent.append(total)
            sock.close()

    watcher = threading.Thread(target=sample)
    watcher.start()
    bombs = [threading.Thread(target=bomb) for _ in range(4)]
    for t in bombs:
        t.start()
    took = member_search(server)
    for t in bombs:
        t.join()
    done.set()
    watcher.join()
    assert max(peak) - before < 50, (before, max(peak))
    assert all(n < 100 * 1024 * 1024 for n in sent), sent  # each was cut off
    assert took < PROMPT_S


def test_searches_whose_clients_left_are_dropped(server: HttpServer) -> None:
    """300 heavy searches sent and abandoned at once (the client closes each connection after
    its request): the next member's search must not wait for them."""
    host, port = address(server)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "search_markdown",
        "arguments": {"query": QUERY, "k": 50, "max_tokens": 100_000}}}).encode()
    request = (f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {ALICE}\r\n"
               f"Accept: application/json, text/event-stream\r\nContent-Type: application/json"
               f"\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    logged = len(server.stderr)
    for n in range(300):  # from as many addresses as the limit per address asks
        sock = attacker(server, f"127.0.1.{1 + n % 100}")
        sock.sendall(request)
        sock.close()
    took = member_search(server)
    assert took < PROMPT_S
    assert not any("Traceback" in line for line in server.stderr[logged:]), server.stderr[logged:]
