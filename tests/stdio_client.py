"""Just enough JSON-RPC over stdio to drive a real ``mdsearch serve`` process.

pytest-lsp is the client of the language-server tests; this one exists for the two places that
need the bare process: a test that reads the server's own stderr (``-X importtime``) and the
benchmarks that time and measure it. One copy, so both speak the protocol the same way.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import IO, Any


class StdioClient:
    """A server process and the requests sent to it. Requests from the server (registrations,
    progress tokens) are accepted with a null result so that it never waits on us."""

    def __init__(self, cmd: list[str], env: dict[str, str], stderr: Path | None = None) -> None:
        self._stderr: IO[str] | None = stderr.open("w") if stderr else None
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr or subprocess.DEVNULL, env=env,
        )
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
        """The result of one request; an error answer or no answer in ``timeout`` raises."""
        self._next += 1
        rid = self._next
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        with self._cond:
            if not self._cond.wait_for(lambda: rid in self._responses, timeout):
                raise TimeoutError(f"no answer to {method} in {timeout} s")
            body = self._responses.pop(rid)
        if "error" in body:
            raise RuntimeError(f"{method}: {body['error']}")
        return body.get("result")

    def rss_mb(self) -> float:
        """The server's resident memory now (VmRSS)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self) -> None:
        """shutdown, exit, and the process gone whatever happened."""
        try:
            self.request("shutdown", None, timeout=30)
            self.notify("exit", None)
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=30)
            if self._stderr:
                self._stderr.close()
