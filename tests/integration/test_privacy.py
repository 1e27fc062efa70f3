"""No telemetry, no network: every mdsearch process as a person starts it, under a fresh home.

ONNX Runtime writes a device id and an event queue under ``~/.cache/Microsoft/`` and looks up its
telemetry host unless ``ORT_DISABLE_TELEMETRY`` is set before it is imported (issue 27). These
tests run ``index``, ``search``, ``serve`` and ``mcp`` with the real model, with HOME and the
cache folders pointing at an empty temporary folder and the variable set to ``0`` (a user's
environment must not turn it back on), then look for what ONNX Runtime leaves behind (without
the fix, the first test finds ``.onnxruntime`` after the first command); and they record the
process tree's socket calls with ``strace`` where it is installed. On this machine the telemetry
host look-up did not happen within these short runs even without the fix, so the strace test
guards the stronger rule (no network socket at all) rather than reproducing that look-up.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import copy_vault
from tests.stdio_client import StdioClient

pytestmark = pytest.mark.slow

QUERY = "what do we do when more than 5% of requests fail"


def fresh_env(tmp: Path) -> dict[str, str]:
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
           "MDSEARCH_CACHE_DIR": str(tmp / "mdsearch-cache"), "ORT_DISABLE_TELEMETRY": "0"}
    env.pop("ANONYMIZED_TELEMETRY", None)
    return env


def telemetry_left(tmp: Path) -> list[str]:
    """What ONNX Runtime's telemetry (or anyone's) left under the fresh home and caches."""
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*")
                  if p.name in (".onnxruntime", "Microsoft", "DeveloperTools"))


def mdsearch(*args: str, env: dict[str, str], prefix: tuple[str, ...] = ()) -> str:
    done = subprocess.run([*prefix, sys.executable, "-m", "mdsearch_ls", *args], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def serve_until_ready(vault: Path, env: dict[str, str], prefix: tuple[str, ...] = ()) -> None:
    client = StdioClient([*prefix, sys.executable, "-m", "mdsearch_ls", "serve"], env)
    try:
        client.open_folder(vault)
        client.wait_folders()
        assert client.request("workspace/symbol", {"query": QUERY})
        client.request("shutdown")
        client.notify("exit")
        assert client.wait_exit(60) == 0
    finally:
        client.stop()


def mcp_search(vault: Path, env: dict[str, str], prefix: tuple[str, ...] = ()) -> None:
    """One search through ``mdsearch mcp`` over stdio (newline-delimited JSON-RPC)."""
    proc = subprocess.Popen([*prefix, sys.executable, "-m", "mdsearch_ls", "mcp", "--root",
                             str(vault)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def send(msg: dict) -> None:
        proc.stdin.write(json.dumps(msg) + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def answer(msg_id: int) -> dict:
        for line in proc.stdout:  # type: ignore[union-attr]
            msg = json.loads(line)
            if msg.get("id") == msg_id:
                return msg
        raise AssertionError("the MCP server closed stdout")

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "privacy-test", "version": "1"}}})
        answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        deadline = time.monotonic() + 300
        n = 2
        while True:  # until the model has loaded and the index is ready
            send({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                  "params": {"name": "index_status", "arguments": {}}})
            st = answer(n)["result"]["structuredContent"]
            n += 1
            if st["index"]["state"] == "ready" and st["model"]["state"] == "loaded":
                break
            assert time.monotonic() < deadline, st
            threading.Event().wait(0.2)
        send({"jsonrpc": "2.0", "id": n, "method": "tools/call",
              "params": {"name": "search_markdown", "arguments": {"query": QUERY, "k": 3}}})
        assert answer(n)["result"]["structuredContent"]["results"]
    finally:
        proc.stdin.close()
        proc.wait(60)


def test_no_process_leaves_onnxruntime_telemetry_behind(tmp_path: Path) -> None:
    vault = copy_vault(tmp_path / "vault")
    env = fresh_env(tmp_path)
    mdsearch("index", str(vault), "--yes", env=env)
    assert json.loads(mdsearch("search", QUERY, "--root", str(vault), "--json", "-k", "3",
                               env=env))["results"]
    serve_until_ready(vault, env)
    mcp_search(vault, env)
    assert telemetry_left(tmp_path) == []


def _network_calls(trace: Path) -> list[str]:
    """Socket calls of the traced tree that reach beyond this machine's own sockets: any
    connect or send to an AF_INET/AF_INET6 address (a DNS look-up is one, to port 53)."""
    calls = []
    for line in trace.read_text(errors="replace").splitlines():
        if re.search(r"\b(connect|sendto|sendmsg)\(", line) and "AF_INET" in line:
            calls.append(line)
    return calls


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace records the socket calls")
def test_no_process_looks_up_a_host_or_opens_a_network_socket(tmp_path: Path) -> None:
    vault = copy_vault(tmp_path / "vault")
    env = fresh_env(tmp_path)
    trace = tmp_path / "trace"

    def traced(name: str) -> tuple[str, ...]:
        return ("strace", "-f", "-qq", "-e", "trace=connect,sendto,sendmsg", "-o",
                str(trace.with_suffix("." + name)))

    mdsearch("index", str(vault), "--yes", env=env, prefix=traced("index"))
    mdsearch("search", QUERY, "--root", str(vault), env=env, prefix=traced("search"))
    serve_until_ready(vault, env, prefix=traced("serve"))
    mcp_search(vault, env, prefix=traced("mcp"))
    traces = sorted(tmp_path.glob("trace.*"))
    assert len(traces) == 4
    found = {t.suffix: _network_calls(t) for t in traces}
    assert found == {t.suffix: [] for t in traces}


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace records the socket calls")
def test_with_a_chroma_server_the_only_socket_goes_to_that_server(tmp_path: Path) -> None:
    """``chroma_url``: Chroma's HTTP client runs in mdsearch's process, telemetry and all; every
    network socket the index and search processes open must reach the named server and nothing
    else (no telemetry host, no look-up)."""
    from tests.chroma_server import ChromaServer

    vault = copy_vault(tmp_path / "vault")
    env = fresh_env(tmp_path)
    trace = tmp_path / "trace"
    server = ChromaServer(tmp_path / "db").start()
    try:
        for name, args in [("index", ("index", str(vault), "--yes")),
                           ("search", ("search", QUERY, "--root", str(vault)))]:
            mdsearch(*args, "--chroma-url", server.url, env=env,
                     prefix=("strace", "-f", "-qq", "-e", "trace=connect,sendto,sendmsg", "-o",
                             str(trace.with_suffix("." + name))))
    finally:
        server.kill()
    calls = [c for t in sorted(tmp_path.glob("trace.*")) for c in _network_calls(t)]
    assert calls, "the index run must have talked to the Chroma server"
    elsewhere = [c for c in calls if f"sin_port=htons({server.port})" not in c
                 or 'inet_addr("127.0.0.1")' not in c]
    assert elsewhere == []
