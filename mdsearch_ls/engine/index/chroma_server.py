"""Talking to a Chroma server (``chroma_url``): a look before anything is written, timeouts on
every request, and a bounded retry that ends in a message, never a hang.

Chroma's ``HttpClient`` sends every request without a timeout, so a server that accepts the
connection and never answers would hold an index run (or an editor's server) for ever, and a
server that died mid-run would surface as a bare ``httpx`` traceback. Here a refused, reset or
timed-out request is tried again a few times within :data:`RETRY_BUDGET_S` (a restarting server
comes back in about a second), then becomes a :class:`VectorServerError` naming the URL;
anything that is not Chroma's answer (a web page, an empty body) is that error at once. Every
write is an upsert or a delete of whole ids, so trying one again is harmless.

Only httpx is imported at module level: the look before an open must not pay for Chroma's
import (seconds), and a read-only search never comes here at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from mdsearch_ls.engine.errors import VectorServerError

log = logging.getLogger(__name__)

T = TypeVar("T")

CONNECT_TIMEOUT_S = 3.0
"""How long a connection may take: on loopback or a LAN a live server accepts in milliseconds."""
HEARTBEAT_TIMEOUT_S = 5.0
"""How long the look before an open waits for Chroma's heartbeat, an answer it gives at once."""
REQUEST_TIMEOUT_S = 60.0
"""How long one request may take: a batch of 5,461 vectors is written in well under a second
by a healthy server, so a minute means something is wrong, not slow."""
RETRY_DELAYS_S = (0.5, 1.0, 2.0)
"""Pauses between attempts (so at most four): a server being restarted answers within them."""
RETRY_BUDGET_S = 10.0
"""No new attempt starts after this long: the whole retry ends within about this plus one
request's timeout."""

HEARTBEAT_PATH = "/api/v2/heartbeat"


def _hint(url: str) -> str:
    port = urlsplit(url).port
    return (f"start it (`chroma run --path DIR --host 127.0.0.1 --port {port}`), or leave "
            f"chroma_url (--chroma-url) empty to keep the vectors in the index folder")


def _why(exc: BaseException) -> str:
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {CONNECT_TIMEOUT_S:g} s"
    if isinstance(exc, httpx.TimeoutException):
        return "it accepted the connection but did not answer in time"
    if isinstance(exc, httpx.ConnectError):
        text = str(exc).lower()
        return "connection refused" if "refused" in text else f"cannot connect ({exc})"
    if isinstance(exc, httpx.RemoteProtocolError):
        return f"it closed the connection without a valid answer ({exc})"
    return f"{type(exc).__name__}: {exc}"


def with_retries(url: str, what: str, fn: Callable[[], T]) -> T:
    """``fn()``, tried again while the server at ``url`` is unreachable (refused, reset, timed
    out), within :data:`RETRY_BUDGET_S`; then a :class:`VectorServerError` saying so."""
    start = time.monotonic()
    attempts = 0
    for delay in (*RETRY_DELAYS_S, None):
        attempts += 1
        try:
            return fn()
        except httpx.TransportError as exc:
            last: BaseException = exc
        except ValueError as exc:  # Chroma's client wraps a failed connect in a ValueError
            if not isinstance(exc.__context__, httpx.TransportError):
                raise
            last = exc.__context__
        if delay is None or time.monotonic() - start + delay > RETRY_BUDGET_S:
            break
        log.warning("the Chroma server at %s did not answer (%s) while %s: trying again in "
                    "%.1f s", url, _why(last), what, delay)
        time.sleep(delay)
    spent = time.monotonic() - start
    raise VectorServerError(
        f"the Chroma server at {url} does not answer ({_why(last)}; {attempts} attempt"
        f"{'s' if attempts > 1 else ''} over {spent:.1f} s, while {what}): {_hint(url)}"
    ) from last


def check(url: str) -> None:
    """Make sure a Chroma server answers at ``url`` before an open writes anything (the index
    folder, the lock, a new manifest): its heartbeat, within :data:`HEARTBEAT_TIMEOUT_S`, tried
    again while it is unreachable; an answer that is not Chroma's is an error at once."""
    timeout = httpx.Timeout(HEARTBEAT_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)

    def beat() -> httpx.Response:
        # trust_env=False: no proxy from the environment between us and a server we were named.
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            return client.get(url + HEARTBEAT_PATH)

    response = with_retries(url, "checking its heartbeat", beat)
    try:
        body = response.json()
        ok = response.status_code == 200 and isinstance(body["nanosecond heartbeat"], int)
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        shown = " ".join(response.text[:60].split()) or "an empty body"
        raise VectorServerError(
            f"the server at {url} does not answer as a Chroma server does (GET "
            f"{HEARTBEAT_PATH} gave HTTP {response.status_code}: {shown!r}): check chroma_url "
            f"(--chroma-url); it must name a `chroma run` server of Chroma 1.x"
        )


def connect(url: str) -> Any:
    """A Chroma ``HttpClient`` for ``url`` whose every request has a timeout, telemetry off.

    Its constructor already asks the server two questions with no timeout (Chroma gives no hook
    before them); :func:`check` ran just before, so a server that does not answer was refused
    there. Errors become :class:`VectorServerError`.
    """
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal: Chroma builds the URL by plain concatenation
        host = f"[{host}]"

    def make() -> Any:
        return chromadb.HttpClient(
            host=host, port=parts.port or 8000, ssl=parts.scheme == "https",
            settings=ChromaSettings(anonymized_telemetry=False),
        )

    try:
        client = with_retries(url, "connecting", make)
    except VectorServerError:
        raise
    except Exception as exc:
        raise VectorServerError(
            f"the Chroma server at {url} cannot be used ({exc}): check chroma_url (--chroma-url)"
        ) from exc
    client._server._session.timeout = httpx.Timeout(REQUEST_TIMEOUT_S,
                                                    connect=CONNECT_TIMEOUT_S)
    return client


class Retrying:
    """A Chroma client or collection whose every method call goes through :func:`with_retries`
    and whose other failures become :class:`VectorServerError` (a server's refusal is not damage
    of the local index, so nothing is set aside for it)."""

    def __init__(self, target: Any, url: str) -> None:
        self._target = target
        self._url = url

    @property
    def target(self) -> Any:
        return self._target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return with_retries(self._url, f"calling {name}",
                                    lambda: attr(*args, **kwargs))
            except VectorServerError:
                raise
            except Exception as exc:
                text = " ".join(str(exc).split())[:240] or type(exc).__name__
                raise VectorServerError(
                    f"the Chroma server at {self._url} failed {name}: {text}"
                ) from exc

        return call
