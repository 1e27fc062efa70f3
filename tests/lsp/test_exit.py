"""The server never outlives its editor: it exits on stdin EOF and when processId dies.

Driven with a raw subprocess and the shared framing of tests/stdio_client.py: pytest-lsp owns
stdin otherwise.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.stdio_client import frame, read_message

from .conftest import SERVER_CMD, copy_vault

pytestmark = pytest.mark.slow


def start(vault: Path, cache: Path, pid: int | None) -> subprocess.Popen:
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache)}
    proc = subprocess.Popen(SERVER_CMD, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    proc.stdin.write(frame({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": pid, "rootUri": vault.as_uri(), "capabilities": {},
                   "workspaceFolders": [{"uri": vault.as_uri(), "name": vault.name}]},
    }))
    proc.stdin.flush()
    while True:
        msg = read_message(proc.stdout)
        if msg.get("id") == 1:
            assert "result" in msg, msg
            break
    proc.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
    proc.stdin.flush()
    return proc


def wait_exit(proc: subprocess.Popen, timeout: float) -> float:
    t = time.monotonic()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"server still running {timeout}s later") from None
    return time.monotonic() - t


def test_exits_when_stdin_closes(tmp_path) -> None:
    proc = start(copy_vault(tmp_path / "v"), tmp_path / "cache", os.getpid())
    time.sleep(1.0)  # let the background start begin
    proc.stdin.close()
    took = wait_exit(proc, 15)
    print(f"exit after stdin EOF: {took:.1f}s")


def test_exits_when_parent_process_dies(tmp_path) -> None:
    parent = subprocess.Popen(["sleep", "300"])
    proc = start(copy_vault(tmp_path / "v"), tmp_path / "cache", parent.pid)
    try:
        time.sleep(1.0)
        assert proc.poll() is None
        parent.kill()
        parent.wait()
        took = wait_exit(proc, 10)
        print(f"exit after processId died: {took:.1f}s")
    finally:
        if parent.poll() is None:
            parent.kill()
        if proc.poll() is None:
            proc.kill()
