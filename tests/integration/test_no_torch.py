"""Real mdsearch processes on the default backend never import torch, sentence-transformers or
transformers: ``index``, ``search``, and ``serve`` through initialize and a workspace/symbol
answer. Each runs with ``python -X importtime``, which logs every module a process imports to
stderr, whatever way it exits; torch may well be installed (CI installs the torch extra)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
HEAVY = {"torch", "sentence_transformers", "transformers", "scipy", "sklearn"}


def imported(stderr: str) -> set[str]:
    """Top-level packages named in ``-X importtime`` lines."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and line.count("|") >= 2:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "imported package":
                names.add(name.split(".")[0])
    return names


def mdsearch(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "mdsearch_ls", *args],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = dict(os.environ)
    e["MDSEARCH_CACHE_DIR"] = str(tmp_path / "cache")
    e.pop("OMP_WAIT_POLICY", None)
    return e


@pytest.fixture
def vault(tmp_path: Path, write) -> Path:
    root = tmp_path / "vault"
    write(root, "ops/Incidents.md", "# Incidents\n\n## Escalation\n\nPage the on-call lead when "
          "more than 5% of requests fail for ten minutes.\n")
    write(root, "eng/Releases.md", "# Releases\n\n## Rolling back\n\nRedeploy the previous image "
          "tag first, investigate later.\n")
    write(root, "Home.md", "# Home\n\nThe studio handbook: [[Incidents]], [[Releases]].\n")
    return root


def test_index_and_search_import_no_torch(vault: Path, env: dict[str, str]) -> None:
    index = mdsearch(["index", str(vault)], env)
    assert index.returncode == 0, index.stderr[-2000:]
    assert "onnxruntime" in imported(index.stderr), "the index command embedded nothing?"
    assert not imported(index.stderr) & HEAVY, imported(index.stderr) & HEAVY
    for mode in ("hybrid", "semantic", "keyword"):
        search = mdsearch(["search", "roll back a bad release", "--root", str(vault),
                           "--mode", mode, "--json"], env)
        assert search.returncode == 0, search.stderr[-2000:]
        hits = json.loads(search.stdout.splitlines()[0])["results"]
        assert hits and hits[0]["path"] == "eng/Releases.md", (mode, hits)
        assert not imported(search.stderr) & HEAVY, (mode, imported(search.stderr) & HEAVY)


class StdioClient:
    """Just enough JSON-RPC over stdio to drive a real server process."""

    def __init__(self, cmd: list[str], env: dict[str, str], stderr_path: Path) -> None:
        self._stderr = stderr_path.open("w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, env=env)
        self._responses: dict[int, Any] = {}
        self._cond = threading.Condition()
        self._next = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            headers: dict[str, str] = {}
            while True:
                line = out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                key, _, value = line.decode().partition(":")
                headers[key.strip().lower()] = value.strip()
            body = json.loads(out.read(int(headers["content-length"])))
            if "id" in body and "method" in body:  # a request from the server: accept it
                self._send({"jsonrpc": "2.0", "id": body["id"], "result": None})
            elif "id" in body:
                with self._cond:
                    self._responses[body["id"]] = body
                    self._cond.notify_all()

    def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        self.proc.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any, timeout: float = 120) -> Any:
        self._next += 1
        rid = self._next
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        with self._cond:
            assert self._cond.wait_for(lambda: rid in self._responses, timeout), method
            body = self._responses.pop(rid)
        assert "error" not in body, body
        return body["result"]

    def close(self) -> None:
        self.proc.wait(timeout=30)
        self._stderr.close()


def test_serve_through_a_workspace_symbol_answer_imports_no_torch(
    vault: Path, env: dict[str, str], tmp_path: Path
) -> None:
    stderr = tmp_path / "serve.stderr"
    client = StdioClient([sys.executable, "-X", "importtime", "-m", "mdsearch_ls", "serve"],
                         env, stderr)
    try:
        client.request("initialize", {
            "processId": os.getpid(), "rootUri": vault.as_uri(), "capabilities": {},
            "workspaceFolders": [{"uri": vault.as_uri(), "name": "vault"}],
        })
        client.notify("initialized", {})
        deadline = time.monotonic() + 180
        while True:  # indexing runs in the background: ask until it is ready
            status = client.request("workspace/executeCommand",
                                    {"command": "mdsearch.status", "arguments": []})
            folders = status.get("folders") or []
            if folders and all(f["state"] == "ready" for f in folders):
                break
            assert time.monotonic() < deadline, status
            threading.Event().wait(0.2)
        symbols = client.request("workspace/symbol", {"query": "roll back a bad release"})
        assert symbols and symbols[0]["location"]["uri"].endswith("eng/Releases.md"), symbols
        client.request("shutdown", None)
        client.notify("exit", None)
    finally:
        if client.proc.poll() is None:
            client.proc.terminate()
        client.close()
    names = imported(stderr.read_text())
    assert {"pygls", "onnxruntime"} <= names, "the server never loaded the model?"
    assert not names & HEAVY, names & HEAVY
