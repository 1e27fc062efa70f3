"""The one channel between mdsearch processes: bytes in, bytes out, only between one user's
processes, on Linux, macOS and Windows.

A process that holds an index (a language server, an MCP server, the background process, a
command holding it for its own run) listens on one endpoint; every other process that needs
that index connects there and asks. The transport is the standard library's
:mod:`multiprocessing.connection`: a Unix socket on POSIX (in the user's own cache folder), a
named pipe on Windows, loopback TCP where neither exists (a Python without ``AF_UNIX``, a socket
path too long for the system). Only ``send_bytes``/``recv_bytes`` are used: every message is
one JSON document (:mod:`.messages` declares them), never a pickle, so a message can never run
code in the process that reads it.

**Who may connect.** A holder makes a random 32-byte key when it starts listening and writes
it, with its address, into a record only its user can read (:class:`Endpoint`: ``holder.json``
in the index folder, ``background.json`` in the cache folder). Before a byte of a request is
read, each side proves to the other that it knows the key (``multiprocessing``'s own HMAC
challenge, both ways). Another user cannot read the record, so cannot connect; on POSIX the
socket also sits in a folder only its owner can enter.

**Why no client can hold up another.** Each connection gets a thread of its own (at most
:data:`MAX_CONNECTIONS` at once, the rest refused and logged at most once a minute); its
handshake and every request must arrive whole within a deadline (a socket receive timeout on
POSIX, so trickled bytes time out too), an idle connection is closed, and a message is at most
:data:`MAX_MESSAGE` bytes. The accepting thread does nothing but accept.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import socket
import stat
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from multiprocessing import connection as mpc
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAX_MESSAGE = 16 << 20
"""Bytes in one message: a request is a query or a note's text; an answer, k sections."""
HANDSHAKE_S = 5.0
"""How long a new connection has to prove it knows the key."""
READ_S = 10.0
"""How long the bytes of one message may take to arrive once they have started."""
SEND_S = 30.0
"""How long an answer may wait for a client to read it."""
IDLE_S = 300.0
"""A connection that sends nothing for this long is closed (a client keeps a few open)."""
MAX_CONNECTIONS = 64
"""Connections served at once; more are closed at once (one user's processes need a few)."""
CLOSE_WAIT_S = 5.0
"""How long a closing endpoint waits for the answers it is sending."""
UNIX_PATH_MAX = 100
"""Longest socket path used (Linux takes 107 bytes, macOS 103): past it, loopback TCP."""


class ChannelError(Exception):
    """The holder could not be reached, or stopped answering: the caller looks again for who
    holds the index (the holder may have exited, and the index be free to hold)."""


@dataclass(frozen=True)
class Endpoint:
    """Where a holder listens and the key that admits its user's processes."""

    family: str
    """``AF_UNIX``, ``AF_PIPE`` (Windows) or ``AF_INET`` (loopback)."""
    address: Any
    """A socket path, a pipe name, or ``[host, port]``."""
    key: str
    """The key, in hex."""
    pid: int
    role: str
    """What holds: ``server`` (a language or MCP server), ``background`` or ``command``."""

    def save(self, path: Path) -> None:
        """Write the record where clients look, readable by this user only, atomically (a
        client never reads half of one)."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(asdict(self), out)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> Endpoint | None:
        """The record at ``path``; None when there is none or it is not one."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            address = raw["address"]  # JSON has no tuples: a TCP address comes back a list
            address = tuple(address) if isinstance(address, list) else address
            return cls(family=str(raw["family"]), address=address, key=str(raw["key"]),
                       pid=int(raw["pid"]), role=str(raw["role"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def forget(self, path: Path) -> None:
        """Remove the record at ``path`` if it is still this one (a newer holder's stays)."""
        if Endpoint.load(path) == self:
            with contextlib.suppress(OSError):
                path.unlink()

    def _target(self) -> Any:
        return tuple(self.address) if self.family == "AF_INET" else self.address


def _family_and_address(run_dir: Path) -> tuple[str, Any]:
    """A named pipe on Windows; a Unix socket in ``run_dir`` where the system has them, the
    path is short enough and the folder is ours alone; else loopback TCP on a port the system
    picks (the key guards every family alike)."""
    if sys.platform == "win32":
        return "AF_PIPE", rf"\\.\pipe\mdsearch-{os.getpid()}-{secrets.token_hex(8)}"
    if "AF_UNIX" in mpc.families and _private(run_dir):
        path = os.path.join(run_dir, f"{os.getpid()}-{secrets.token_hex(4)}.sock")
        if len(os.fsencode(path)) <= UNIX_PATH_MAX:
            return "AF_UNIX", path
    return "AF_INET", ("127.0.0.1", 0)


def _private(run_dir: Path) -> bool:
    """Whether ``run_dir`` exists (made now if not), is a folder rather than a link, belongs to
    this user and lets no one else in: a socket in a folder someone else can write could be
    swapped for theirs."""
    with contextlib.suppress(OSError):
        run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = os.lstat(run_dir)
        return (stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()
                and not info.st_mode & 0o077)
    return False


def _deadline(conn: Any, seconds: float | None, option: str = "SO_RCVTIMEO") -> None:
    """Make every blocking read (``SO_RCVTIMEO``) or write (``SO_SNDTIMEO``) of ``conn`` fail
    after ``seconds`` (None: never), not only the wait for its first byte: a timeout on the
    socket itself, which its other descriptors share. A named pipe has no such option; there
    the wait for the first byte is bounded (:class:`_Timed`)."""
    if isinstance(conn, mpc.Connection) and hasattr(socket, option):
        value = struct.pack("ll", int(seconds or 0), int(((seconds or 0) % 1) * 1e6))
        with contextlib.suppress(OSError), socket.socket(fileno=os.dup(conn.fileno())) as sock:
            sock.setsockopt(socket.SOL_SOCKET, getattr(socket, option), value)


class _Timed:
    """A connection whose reads wait at most ``seconds`` for their first byte, for the
    handshake functions of :mod:`multiprocessing.connection` (which call ``send_bytes`` and
    ``recv_bytes`` only)."""

    def __init__(self, conn: Any, seconds: float) -> None:
        self.conn, self.seconds = conn, seconds

    def send_bytes(self, data: bytes) -> None:
        self.conn.send_bytes(data)

    def recv_bytes(self, maxlength: int | None = None) -> bytes:
        if not self.conn.poll(self.seconds):
            raise TimeoutError(f"no answer in {self.seconds:.0f} s")
        return self.conn.recv_bytes(maxlength)


class _Quiet:
    """A log line at most once a ``every`` seconds, with how many were held back: a client
    opening thousands of connections must not fill the disk with the same sentence."""

    def __init__(self, every: float = 60.0) -> None:
        self.every, self.last, self.held = every, -1e9, 0
        self._lock = threading.Lock()

    def warning(self, text: str, *args: Any) -> None:
        with self._lock:
            now = time.monotonic()
            if now - self.last < self.every:
                self.held += 1
                return
            held, self.held, self.last = self.held, 0, now
        log.warning(text + (f" ({held} more since the last such line)" if held else ""), *args)


Reply = Callable[[dict[str, Any]], None]
"""Sends one message back on the connection a request came on (progress before the answer)."""
Handler = Callable[[dict[str, Any], Reply], dict[str, Any]]
"""A request in, its answer out; may send progress messages through ``Reply`` first."""


class Server:
    """One process's endpoint: accepts connections and answers each request with ``handler``,
    on threads of its own (see the module docstring)."""

    def __init__(self, handler: Handler, run_dir: Path, role: str) -> None:
        self.handler = handler
        key = secrets.token_bytes(32)
        family, address = _family_and_address(run_dir)
        try:
            self._listener = mpc.Listener(address, family, backlog=MAX_CONNECTIONS)
        except OSError:  # a socket path the system refuses: loopback TCP still serves
            if family != "AF_UNIX":
                raise
            self._listener = mpc.Listener(("127.0.0.1", 0), "AF_INET", backlog=MAX_CONNECTIONS)
        self._key = key
        self.endpoint = Endpoint(family, self._listener.address, key.hex(), os.getpid(), role)
        self._open = 0
        self._lock = threading.Condition()
        self._closed = False
        self._conns: set[Any] = set()
        self._busy: set[Any] = set()  # connections between a request and its answer
        self._quiet = _Quiet()
        threading.Thread(target=self._accept, name="mdsearch-channel", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn = self._listener.accept()
            except OSError as exc:  # closed, or out of descriptors: said once a minute
                if self._closed:
                    return
                self._quiet.warning("the channel could not accept a connection: %s", exc)
                time.sleep(0.05)  # (not a busy loop while the descriptors run out)
                continue
            with self._lock:
                full = self._open >= MAX_CONNECTIONS
                if not full:
                    self._open += 1
                    self._conns.add(conn)
            if full:
                self._quiet.warning("the channel refused a connection: %d are open already",
                                    MAX_CONNECTIONS)
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), name="mdsearch-channel-conn",
                             daemon=True).start()

    def _serve(self, conn: Any) -> None:
        try:
            _deadline(conn, SEND_S, "SO_SNDTIMEO")  # a client that stops reading lets go
            _deadline(conn, HANDSHAKE_S)
            mpc.deliver_challenge(_Timed(conn, HANDSHAKE_S), self._key)
            mpc.answer_challenge(_Timed(conn, HANDSHAKE_S), self._key)
            while not self._closed and conn.poll(IDLE_S):
                _deadline(conn, READ_S)
                raw = conn.recv_bytes(MAX_MESSAGE)
                _deadline(conn, None)  # an answer may take a while to make (an index run)
                self._answer(conn, raw)
        except (OSError, EOFError, TimeoutError, mpc.AuthenticationError, AssertionError) as exc:
            log.debug("a channel connection ended: %s", exc)  # gone, too slow, or no key
        finally:
            with self._lock:
                self._open -= 1
                self._conns.discard(conn)
            conn.close()

    def _answer(self, conn: Any, raw: bytes) -> None:
        def reply(message: dict[str, Any]) -> None:
            conn.send_bytes(json.dumps(message, ensure_ascii=False).encode())

        with self._lock:
            self._busy.add(conn)
        try:
            try:
                request = json.loads(raw)
            except ValueError as exc:
                request = {"bad": f"not JSON: {exc}"}
            answer = self.handler(request if isinstance(request, dict) else
                                  {"bad": "not a JSON object"}, reply)
            reply(answer)
        finally:
            with self._lock:
                self._busy.discard(conn)
                self._lock.notify_all()

    def close(self) -> None:
        """Stop accepting and close every connection (a client then looks again for a holder).
        A request being answered gets :data:`CLOSE_WAIT_S` to send its answer first: the one
        that asked this process to stop (``Stop``, or ``Leave`` of its last folder) is among
        them, and its asker should read "done", not a dropped connection."""
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            self._lock.wait_for(lambda: not self._busy, CLOSE_WAIT_S)
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.close()


CONNECT_S = 5.0
"""How long a client waits for a holder to accept and prove its key."""
ANSWER_S = 120.0
"""How long a client waits for any message of an answer (a first look at a large vault takes
seconds; an index run sends progress as it goes)."""


class Client:
    """A connection to one holder, for any number of requests in turn (one thread at a time)."""

    def __init__(self, endpoint: Endpoint, timeout: float = CONNECT_S) -> None:
        self.endpoint = endpoint
        key = bytes.fromhex(endpoint.key)
        try:
            self._conn = mpc.Client(endpoint._target(), endpoint.family)
        except (OSError, ValueError) as exc:
            raise ChannelError(f"no mdsearch process answers at {endpoint.address}: "
                               f"{exc}") from None
        try:
            mpc.answer_challenge(_Timed(self._conn, timeout), key)
            mpc.deliver_challenge(_Timed(self._conn, timeout), key)
        except (OSError, EOFError, TimeoutError, mpc.AuthenticationError, AssertionError) as exc:
            self._conn.close()
            raise ChannelError(f"the mdsearch process {endpoint.pid} did not let us in: "
                               f"{exc}") from None

    def ask(self, request: dict[str, Any], *, timeout: float = ANSWER_S,
            on_progress: Reply | None = None) -> dict[str, Any]:
        """The answer to ``request``; messages of type ``progress`` before it go to
        ``on_progress``. :class:`ChannelError` when the holder is gone or silent."""
        try:
            self._conn.send_bytes(json.dumps(request, ensure_ascii=False).encode())
            while True:
                if not self._conn.poll(timeout):
                    raise ChannelError(f"the mdsearch process {self.endpoint.pid} did not "
                                       f"answer in {timeout:.0f} s")
                message = json.loads(self._conn.recv_bytes(MAX_MESSAGE))
                if message.get("type") != "progress":
                    return message
                if on_progress is not None:
                    on_progress(message)
        except (OSError, EOFError, ValueError) as exc:
            raise ChannelError(f"the mdsearch process {self.endpoint.pid} stopped answering: "
                               f"{exc}") from None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.close()


__all__ = ["ChannelError", "Client", "Endpoint", "Server"]
