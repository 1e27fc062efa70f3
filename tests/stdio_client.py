"""The one JSON-RPC-over-stdio client of the tests and benchmarks that drive a bare server process.

pytest-lsp is the client of most language-server tests; this one exists for the places that need
the bare process: tests that send malformed bytes or read the server's own stderr, the exit and
kill tests, and the benchmarks that time and measure the process. One copy, so all of them speak
the protocol (Content-Length framing, requests from the server accepted with a null result so it
never waits on us) the same way.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any, BinaryIO

ABSENT: Any = object()
"""Leave ``params`` (or an id) out of a message altogether, which is not the same as ``null``."""


def frame(message: Any) -> bytes:
    """A message as it goes on the wire."""
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_message(stream: BinaryIO | IO[bytes]) -> Any:
    """The next message on ``stream``; EOFError when the server closed its output."""
    headers: dict[str, str] = {}
    while True:
        line = stream.readline()
        if not line:
            raise EOFError("server closed stdout")
        if not line.strip():
            break
        key, _, value = line.decode("ascii").partition(":")
        headers[key.strip().lower()] = value.strip()
    return json.loads(stream.read(int(headers["content-length"])))


class StdioClient:
    """A server process and the messages exchanged with it.

    A reader thread answers the server's own requests (registrations, progress tokens) with a
    null result and queues everything else in order; :meth:`answer` takes the response to one id
    from that queue, :meth:`notifications` keeps the rest for a test to look at. :meth:`request`
    is the convenient form (the result, or an exception); :meth:`send` and :meth:`send_body`
    let a test put anything on the wire, malformed or not.
    """

    def __init__(self, cmd: list[str], env: dict[str, str], stderr: Path | None = None,
                 cwd: Path | None = None) -> None:
        self._stderr: IO[bytes] | None = stderr.open("wb") if stderr else None
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr or subprocess.DEVNULL, env=env, cwd=cwd,
        )
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.seen: list[Any] = []
        """Every response and notification taken from the inbox so far."""
        self._write_lock = threading.Lock()
        self._ids = iter(range(1, 10**9))
        threading.Thread(target=self._read, name="stdio-client-reader", daemon=True).start()

    # -- the wire ----------------------------------------------------------------------------

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            while True:
                try:
                    msg = read_message(self.proc.stdout)
                except (EOFError, ValueError, KeyError):
                    return
                if isinstance(msg, dict) and "method" in msg and "id" in msg:
                    self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
                    continue
                self.inbox.put(msg)
        finally:
            self.inbox.put(None)

    def send_body(self, body: bytes) -> None:
        """``body`` framed with its true length, whatever it holds."""
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def send_raw(self, data: bytes) -> None:
        """Bytes on the wire exactly as given (a wrong header, half a frame)."""
        assert self.proc.stdin is not None
        with self._write_lock:
            try:
                self.proc.stdin.write(data)
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass  # the server is gone; whoever waits for an answer will say so

    def send(self, message: Any) -> None:
        self.send_body(json.dumps(message).encode())

    def send_request(self, method: str, params: Any = ABSENT, *, msg_id: Any = ABSENT) -> Any:
        """Send a request; its id (a fresh number unless ``msg_id`` is given)."""
        msg_id = next(self._ids) if msg_id is ABSENT else msg_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not ABSENT:
            message["params"] = params
        self.send(message)
        return msg_id

    def notify(self, method: str, params: Any = ABSENT) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not ABSENT:
            message["params"] = params
        self.send(message)

    def answer(self, msg_id: Any, timeout: float = 120) -> dict[str, Any]:
        """The whole response to ``msg_id`` (result or error); other messages met on the way are
        kept in :attr:`seen`."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer to request {msg_id!r} within {timeout} s")
            try:
                msg = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            if msg is None:
                self.inbox.put(None)  # later waiters learn it too
                raise EOFError(f"the server closed its output before answering {msg_id!r}; "
                               f"exit code {self.proc.poll()}")
            self.seen.append(msg)
            if isinstance(msg, dict) and "method" not in msg and msg.get("id") == msg_id:
                return msg

    def request(self, method: str, params: Any = None, timeout: float = 120) -> Any:
        """The result of one request; an error answer raises RuntimeError, none TimeoutError."""
        body = self.answer(self.send_request(method, params), timeout)
        if "error" in body:
            raise RuntimeError(f"{method}: {body['error']}")
        return body.get("result")

    def open_folder(self, root: Path, name: str = "vault") -> None:
        """``initialize`` with ``root`` as the one workspace folder, then ``initialized``."""
        import os

        self.request("initialize", {"processId": os.getpid(), "rootUri": root.as_uri(),
                                    "capabilities": {},
                                    "workspaceFolders": [{"uri": root.as_uri(), "name": name}]})
        self.notify("initialized", {})

    def wait_folders(self, done: tuple[str, ...] = ("ready",), timeout: float = 300) -> Any:
        """Ask ``mdsearch.status`` until every folder's state is one of ``done`` (the model
        loads and the first index runs in the background); the last status."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.request("workspace/executeCommand",
                                  {"command": "mdsearch.status", "arguments": []})
            folders = status.get("folders") or []
            if folders and all(f["state"] in done for f in folders):
                return status
            assert time.monotonic() < deadline, status
            threading.Event().wait(0.2)

    def notifications(self, method: str) -> list[Any]:
        """The params of the notifications named ``method`` seen so far."""
        return [m.get("params") for m in self.seen
                if isinstance(m, dict) and m.get("method") == method and "id" not in m]

    # -- the process -------------------------------------------------------------------------

    def rss_mb(self) -> float:
        """The server's resident memory now (VmRSS)."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def rss_parts_mb(self) -> dict[str, float]:
        """The server's resident memory by kind: ``anon`` (its own heap: what it costs the
        machine) and ``file`` (mapped files, the index's vector snapshot among them: page cache
        the kernel can take back)."""
        parts = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(("RssAnon:", "RssFile:")):
                    parts[line[3:7].lower()] = int(line.split()[1]) / 1024
        return parts

    def wait_exit(self, timeout: float = 30) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"server still running {timeout} s after exit") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        if self._stderr:
            self._stderr.close()
            self._stderr = None

    def stop(self, timeout: float = 30) -> None:
        """shutdown, exit, and the process gone whatever happened."""
        try:
            if self.proc.poll() is None:
                self.request("shutdown", None, timeout=timeout)
                self.notify("exit")
                self.proc.wait(timeout=timeout)
        except (TimeoutError, EOFError, RuntimeError, subprocess.TimeoutExpired):
            pass  # killed below
        finally:
            self.kill()
