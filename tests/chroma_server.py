"""A real Chroma server for tests: ``chroma run`` from the chromadb wheel, on a free loopback port.

Started as its own process (the same binary a person runs), ready once its heartbeat answers
(polled, with a 30 s deadline), killed with SIGKILL when a test wants it dead mid-run, and
restarted on the same folder and port to see what it kept.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

READY_DEADLINE_S = 30.0


def chroma_binary() -> str:
    """The ``chroma`` script beside this interpreter (the venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "chroma"
    if beside.is_file():
        return str(beside)
    found = shutil.which("chroma")
    if found is None:
        raise RuntimeError("the chroma command (from the chromadb wheel) is not installed")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ChromaServer:
    """One ``chroma run --path DIR --host 127.0.0.1 --port N`` process."""

    def __init__(self, path: Path, port: int | None = None) -> None:
        self.path = path
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = path.parent / f"{path.name}-chroma.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ChromaServer:
        self.path.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False", "NO_COLOR": "1"}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [chroma_binary(), "run", "--path", str(self.path), "--host", "127.0.0.1",
                 "--port", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_DEADLINE_S
        url = self.url + "/api/v2/heartbeat"
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"chroma run exited with {self.proc.returncode}: "
                                   f"{self.log.read_text(errors='replace')[-2000:]}")
            try:
                if httpx.get(url, timeout=1.0, trust_env=False).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"chroma run did not answer its heartbeat within "
                                   f"{READY_DEADLINE_S:.0f} s")
            time.sleep(0.05)  # polling interval of the heartbeat, not a synchronisation

    def kill(self) -> None:
        """SIGKILL, as a crash or the OOM killer would, and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None
