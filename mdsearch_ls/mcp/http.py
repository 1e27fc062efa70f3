"""``mdsearch mcp --http HOST:PORT``: the same MCP server over the SDK's streamable HTTP, for a
team that shares one index.

What this module decides, and nothing else (the tools are the stdio server's, unchanged):

* **Who may call.** ``--token-file FILE`` holds one member a line, ``NAME TOKEN``. Every request
  needs ``Authorization: Bearer TOKEN`` (the SDK's bearer middleware answers 401 otherwise); the
  file is stat-ed on every request and re-read when it changed, so revoking a member is an edit,
  not a restart. Tokens are compared in constant time and never logged: a log names the member.
  A file that turns unreadable or empty refuses everyone (fail closed) rather than serving on an
  old list.
* **Where it listens.** Loopback by default. A non-loopback address without a token file is
  refused at start: a network listener without a token is a shared folder for the whole LAN.
  Loopback without a token works for one person and says so. The SDK's DNS-rebinding protection
  stays on (a foreign ``Host`` or ``Origin`` is refused); on a non-loopback address the allowed
  hosts are the bound address, this machine's names and any ``--allow-host``.
* **What one client can hold.** uvicorn's h11 protocol (its httptools one buffers a header of
  any length) under :class:`Guarded`: the request line and headers are capped at
  ``MAX_HEAD_BYTES`` (larger: 400 and closed), a request must arrive whole within ``REQUEST_S``
  of its first byte (or of the connection: a slowloris, a half request line, a silent
  connection are closed), at most ``MAX_PER_CLIENT`` connections from one address, and at most
  ``max_connections()`` in all, where a new one takes the place of the oldest that is still
  waiting for its request (a flood from many addresses cannot keep a member out). What limits
  refuse is logged at most once per ``LOG_EVERY_S`` per kind (so is asyncio's own accept
  failure), with a count of the rest. The SDK caps a body (4 MB). A request whose client has
  gone is cancelled (:class:`CancelWhenGone`).
* **Start-up.** The socket is bound before anything else, so a port in use is a clear message and
  exit 2, not a traceback; the index starts once for the process (stateless HTTP runs the SDK's
  lifespan per request, so the library is started here, not there).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import socket
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MIN_TOKEN_CHARS = 16
"""Shorter tokens are refused at load: a guessable token is no token."""
MAX_HEAD_BYTES = 16 * 1024
"""The request line and headers of one request: a bearer token and a proxy's headers are well
under it; h11 answers 400 and closes past it, having buffered no more."""
REQUEST_S = 10.0
"""A request (line, headers, body) must have arrived this long after its first byte, or after
the connection opened; a member's is there in milliseconds."""
MAX_PER_CLIENT = 64
"""Connections open from one address (behind a reverse proxy: from the proxy, which then limits
each client itself)."""
BACKLOG = 64
"""Connections the kernel holds for accepting, and so the most asyncio accepts at once: uvicorn's
own 2,048 let one burst take more descriptors than a service's 1,024 before any was refused."""
LOG_EVERY_S = 10.0
"""A kind of refusal is logged once per this many seconds, with how many were left unsaid."""


class HttpSetupError(Exception):
    """A reason the HTTP server cannot start; the message is for a person (exit 2)."""


@dataclass(frozen=True)
class Listen:
    """Where to listen, parsed from ``HOST:PORT`` (``PORT`` alone means loopback)."""

    host: str
    port: int

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def url_host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127/8, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_listen(text: str) -> Listen:
    """``127.0.0.1:8765``, ``[::1]:8765``, ``0.0.0.0:8765`` or ``8765``; ValueError says why."""
    raw = text.strip()
    host, port_text = "127.0.0.1", raw
    if raw.startswith("["):
        end = raw.find("]")
        if end < 0 or raw[end + 1:end + 2] != ":":
            raise ValueError(f"--http {text!r}: write an IPv6 address as [ADDR]:PORT")
        host, port_text = raw[1:end], raw[end + 2:]
    elif ":" in raw:
        host, _, port_text = raw.rpartition(":")
    if not host:
        raise ValueError(f"--http {text!r}: no host before the port (e.g. 127.0.0.1:8765)")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"--http {text!r}: the port must be a number (e.g. 127.0.0.1:8765)") \
            from None
    if not 0 <= port <= 65535:
        raise ValueError(f"--http {text!r}: the port must be between 0 and 65535")
    return Listen(host, port)


def parse_members(text: str, source: str) -> dict[str, str]:
    """``NAME TOKEN`` lines (``#`` comments and blank lines ignored) as ``{token: name}``.

    Refuses what would make a member ambiguous or a token weak, naming the line, never the
    token."""
    members: dict[str, str] = {}
    names: set[str] = set()
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise HttpSetupError(f"{source}, line {n}: expected 'NAME TOKEN' (two words)")
        name, token = parts
        if len(token) < MIN_TOKEN_CHARS:
            raise HttpSetupError(f"{source}, line {n}: the token of {name!r} is shorter than "
                                 f"{MIN_TOKEN_CHARS} characters (make one with: "
                                 f"python -c 'import secrets; print(secrets.token_urlsafe(24))')")
        if name in names:
            raise HttpSetupError(f"{source}, line {n}: member {name!r} appears twice")
        if token in members:
            raise HttpSetupError(f"{source}, line {n}: {name!r} has the same token as "
                                 f"{members[token]!r}")
        names.add(name)
        members[token] = name
    return members


class TokenFile:
    """The members of a token file, re-read whenever the file changes.

    The stat per request costs microseconds; it is what lets a team revoke a member by editing
    one line while every other assistant keeps its connection."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int, int, int] | None = None
        self._members: dict[str, str] = {}
        self._members = self._load()  # raises HttpSetupError: a bad file at start is exit 2
        if not self._members:
            raise HttpSetupError(f"--token-file {path}: no members in it (one 'NAME TOKEN' a "
                                 f"line)")

    def _stamp(self) -> tuple[int, int, int, int, int]:
        st = os.stat(self.path)
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)

    def _load(self) -> dict[str, str]:
        """The file's members. A file others can read is served with a WARNING (at start and
        at each re-read), not refused: every token in it is a member's key, but refusing would
        turn an upgrade's restart into an outage, and a group of the service's own (0640) can
        be meant. Not on Windows, where modes are ACLs."""
        try:
            stamp = self._stamp()
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise HttpSetupError(f"--token-file {self.path}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise HttpSetupError(f"--token-file {self.path}: cannot be read "
                                 f"({type(exc).__name__})") from None
        members = parse_members(text, f"--token-file {self.path}")
        if os.name != "nt" and stamp[4] & 0o044:
            log.warning("--token-file %s can be read by %s (mode %03o): whoever reads it can "
                        "act as any member; chmod 600 it", self.path,
                        "everyone" if stamp[4] & 0o004 else "its group", stamp[4] & 0o777)
        self._seen = stamp
        return members

    def members(self) -> dict[str, str]:
        """The current ``{token: name}``; empty (everyone refused) while the file is unusable."""
        with self._lock:
            try:
                changed = self._stamp() != self._seen
            except OSError:
                changed = True
            if changed:
                try:
                    self._members = self._load()
                    log.info("token file re-read: %d member(s)", len(self._members))
                    if not self._members:
                        log.warning("--token-file %s has no members now: every request is "
                                    "refused (everyone is locked out) until one is added",
                                    self.path)
                except HttpSetupError as exc:
                    if self._members:
                        log.warning("%s: every request is refused until it is fixed", exc)
                    self._members = {}
                    self._seen = None
            return self._members

    def member(self, token: str) -> str | None:
        """The name of the member holding ``token``, compared in constant time."""
        found = None
        for known, name in self.members().items():
            if hmac.compare_digest(known.encode(), token.encode()):
                found = name
        return found


class MembersVerifier:
    """The SDK's ``TokenVerifier`` over a :class:`TokenFile`: a valid token is an access token
    whose client id is the member's name (what logs show)."""

    def __init__(self, tokens: TokenFile) -> None:
        self.tokens = tokens

    async def verify_token(self, token: str) -> Any:
        """The SDK's ``AccessToken`` for a member's token, None (401) for any other."""
        from mcp.server.auth.provider import AccessToken

        name = self.tokens.member(token)
        if name is None:
            log.info("refused a request with an unknown token")
            return None
        log.debug("request from member %s", name)
        return AccessToken(token=token, client_id=name, scopes=[])


def max_connections() -> int:
    """Connections open at once: 256, or a quarter of the open-file limit when that is lower
    (the index, the model and Chroma keep their own files open), so accepting never meets the
    limit (asyncio would log every failed accept)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # Windows
        return 256
    return 256 if soft == resource.RLIM_INFINITY else max(8, min(256, soft // 4))


class OncePer(logging.Filter):
    """Lets a log record through once per ``seconds`` per message (its template), adding how
    many like it were dropped since: a flood of failed connections is a line every few seconds,
    not 90 MB of log."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds
        self._last: dict[tuple[str, object], float] = {}
        self._dropped: Counter[tuple[str, object]] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        key, now = (record.name, record.msg), time.monotonic()
        if now - self._last.get(key, -self.seconds) < self.seconds:
            self._dropped[key] += 1
            return False
        self._last[key] = now
        if n := self._dropped.pop(key, 0):
            record.msg = f"{record.msg} ({n} more like this in the last {self.seconds:.0f} s)"
        return True


def _guarded_protocol() -> type:
    """:class:`Guarded`, made when serving: uvicorn and h11 are imported only here."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    waiting = (h11.IDLE, h11.SEND_BODY)  # their states before a request has arrived whole
    per_client: Counter[str] = Counter()

    class Guarded(H11Protocol):
        """uvicorn's h11 protocol with the limits of the module docstring (one event loop:
        no lock needed)."""

        _deadline: Any = None
        _refused = False
        _started = 0.0
        _address = ""

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            peer = transport.get_extra_info("peername")
            self._address = str(peer[0]) if peer else ""
            if per_client[self._address] >= MAX_PER_CLIENT:
                return self._refuse(transport, "refused a connection from %s: it has "
                                    f"{MAX_PER_CLIENT} open (the limit per address)")
            ours = [c for c in self.connections
                    if isinstance(c, Guarded) and not c.transport.is_closing()]
            if len(ours) >= max_connections():
                idle = [c for c in ours if c._deadline is not None]  # (request not arrived)
                if not idle:
                    return self._refuse(transport, "refused a connection from %s: "
                                        f"{len(ours)} open, all busy (the limit)")
                oldest = min(idle, key=lambda c: c._started)
                log.warning("closed a waiting connection from %s to make room (%d open, the "
                            "limit)", oldest._address, len(ours))
                oldest._close()
            super().connection_made(transport)
            per_client[self._address] += 1
            self._arm()

        def _refuse(self, transport: Any, message: str) -> None:
            self._refused = True
            log.warning(message, self._address)
            transport.abort()

        def _arm(self) -> None:
            self._started = time.monotonic()
            self._deadline = self.loop.call_later(REQUEST_S, self._too_slow)

        def _too_slow(self) -> None:
            self._deadline = None
            if self.conn.their_state in waiting and not self.transport.is_closing():
                log.warning("closed a connection from %s: its request had not arrived after "
                            f"{REQUEST_S:.0f} s", self._address)
                self._close()

        def _close(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            self.transport.abort()

        def data_received(self, data: bytes) -> None:
            if self._deadline is None and self.conn.their_state is h11.IDLE:
                self._arm()  # a new request on a kept-alive connection
            super().data_received(data)
            if self._deadline is not None and self.conn.their_state not in waiting:
                self._deadline.cancel()
                self._deadline = None

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return
            per_client[self._address] -= 1
            if per_client[self._address] <= 0:
                del per_client[self._address]
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

    return Guarded


class CancelWhenGone:
    """ASGI middleware: a request whose client disconnects before its answer is cancelled, so
    300 searches sent and abandoned do not queue ahead of the next member's (the SDK would run
    each to the end). The body passes through as the app reads it (nothing buffered here);
    once it is read, the client's next message can only be its disconnect, or the answer done.
    A search already running in a thread finishes there, unheard; one still waiting for a
    thread never starts."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        import anyio

        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        body_read, gone, answered = anyio.Event(), anyio.Event(), False

        async def relay() -> Any:
            if body_read.is_set():
                await gone.wait()
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body"):
                body_read.set()
            return message

        async def reply(message: Any) -> None:
            nonlocal answered
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                answered = True

        async with anyio.create_task_group() as group:
            async def watch() -> None:
                await body_read.wait()
                await receive()  # the disconnect (or, once answered, the end)
                if not answered:
                    gone.set()
                    group.cancel_scope.cancel()

            group.start_soon(watch)
            await self.app(scope, relay, reply)
            group.cancel_scope.cancel()


def allowed_hosts(listen: Listen, extra: list[str]) -> list[str]:
    """``Host`` values a request may carry: loopback names, the bound address, this machine's
    names, and what the person named; each with any port or none (a TLS reverse proxy sends
    ``Host: NAME``, and its browser-side ``Origin`` is ``https://NAME``)."""
    names = {"127.0.0.1", "localhost", "[::1]", listen.url_host, *extra}
    if not listen.loopback:
        for name in (socket.gethostname(), socket.getfqdn()):
            if name:
                names.add(name)
    return sorted(names | {f"{n}:*" for n in names})


def bind(listen: Listen) -> socket.socket:
    """The listening socket, bound now so a port in use is a message, not a traceback."""
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((listen.host, listen.port))
    except OSError as exc:
        sock.close()
        why = "the port is in use" if exc.errno in (98, 48) else exc.strerror or str(exc)
        raise HttpSetupError(f"--http {listen.host}:{listen.port}: cannot listen ({why})") \
            from None
    sock.listen(BACKLOG)
    return sock


def serve(server: object, listen: Listen, sock: socket.socket, token_file: str | None,
          extra_hosts: list[str]) -> None:
    """Serve ``server`` (a ``NotesServer``) on ``sock`` (from :func:`bind`) over streamable
    HTTP until SIGINT/SIGTERM."""
    import anyio
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    port = sock.getsockname()[1]
    url = f"http://{listen.url_host}:{port}/mcp"
    hosts = allowed_hosts(listen, extra_hosts)
    origins = [f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts]
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                         allowed_hosts=hosts, allowed_origins=origins)
    app = server.streamable_http_app(  # type: ignore[attr-defined]
        stateless_http=True, json_response=True, transport_security=security, host=listen.host)
    app = CancelWhenGone(app)
    who = "members of " + token_file if token_file else \
        "anyone on this machine, without a token (--token-file FILE for a team)"
    print(f"mdsearch mcp: serving {url} to {who}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=3, http=_guarded_protocol(), backlog=BACKLOG,
                            h11_max_incomplete_event_size=MAX_HEAD_BYTES)
    once = OncePer(LOG_EVERY_S)
    for name in (__name__, "uvicorn.error", "asyncio"):
        logging.getLogger(name).addFilter(once)
    anyio.run(uvicorn.Server(config).serve, [sock])
