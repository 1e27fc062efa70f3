"""What ``mdsearch search`` and the server that holds an index must agree on to talk through the
index's socket: where the socket is, when its folder may be trusted, which settings must match,
and the protocol's version. The server's side is :mod:`mdsearch_ls.engine.service.resident`.

Apart from it because the CLI reads these before it knows whether a server answers, and the
server's module brings threads, a thread pool, ``tempfile`` and the search request types with
it (about 8 ms of imports in a process that is over in a few tens when the server answers).
Standard library only; ``logging`` is imported only to say why a socket did not answer, and
``tempfile`` and ``hashlib`` (which loads OpenSSL: ~3 ms) only for an index folder whose socket
path is too long. ``tests/unit/test_resident_client.py``
holds both sides to the same answers.
"""

from __future__ import annotations

import os
import stat
from _json import encode_basestring_ascii  # the C encoder of json's strings, without json

TYPE_CHECKING = False  # not typing's: the CLI sends its question before importing it (cli/early.py)
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from mdsearch_ls.config import Settings

SOCKET_NAME = "search.sock"
BACKGROUND_SOCKET_NAME = "background.sock"
PROTOCOL_RESIDENT = 1
RANKING_FIELDS = ("include", "exclude", "include_formats", "model", "embedder_backend",
                  "chunk_size", "chunk_overlap", "fusion", "per_file", "max_file_bytes",
                  "max_chunks_per_file")
"""Settings that change which notes are searched or how they rank: the CLI's and the server's
must agree for the server's answer to be the CLI's."""


_printer: Callable[[dict[str, Any], dict[str, Any], Path], dict[str, Any] | None] | None = None


def print_searches_with(
        printer: Callable[[dict[str, Any], dict[str, Any], Path], dict[str, Any] | None] | None,
) -> None:
    """How this process prints a search for the CLI that asked it (a request with ``render``:
    the CLI's arguments, folder and terminal; ``cli/rendering.py``), given by the front end that
    started it, the CLI, whose printer the engine does not import. Without one (a server started
    some other way), the CLI prints the answer itself. Here, not in the server's module: the
    MCP server sets it before its ``initialize``, which must not wait on the engine's imports."""
    global _printer
    _printer = printer


def searches_printed_by() -> Callable[[dict[str, Any], dict[str, Any], Path],
                                      dict[str, Any] | None] | None:
    return _printer


def resident_socket_path(index_dir: Path) -> Path:
    """``<index dir>/search.sock``; where that path is too long for a Unix socket (104 bytes on
    macOS, 108 on Linux), ``<tmp>/mdsearch-<uid>/<hash of the index dir>.sock`` instead, in a
    folder only this user owns (:func:`private_dir` checks it before either side uses it)."""
    from pathlib import Path

    return Path(socket_file(str(Path(index_dir)), SOCKET_NAME))


def background_socket_path(cache: Path) -> Path:
    """``<cache>/background.sock``: where the user's background process takes folders to hold
    (one process, one copy of the model, for every folder the CLI searched); the same fallback
    for a long path as :func:`resident_socket_path`."""
    from pathlib import Path

    return Path(socket_file(str(Path(cache)), BACKGROUND_SOCKET_NAME))


def socket_file(folder: str, name: str = SOCKET_NAME) -> str:
    """:func:`resident_socket_path` (or :func:`background_socket_path`) of a folder given as a
    normalised path string, without ``pathlib`` (the CLI's question sent ahead)."""
    path = os.path.join(folder, name)
    if len(os.fsencode(path)) < 100:
        return path
    import hashlib  # only for a long path: they cost a few ms (OpenSSL, shutil, random)
    import tempfile

    digest = hashlib.sha256(os.fsencode(folder)).hexdigest()[:20]
    short = f"{digest}.sock" if name == SOCKET_NAME else f"{digest}-{name}"
    return os.path.join(tempfile.gettempdir(), f"mdsearch-{os.getuid()}", short)


def private_dir(folder: Path | str, *, create: bool) -> bool:
    """Whether ``folder`` is a real directory of this user's that nobody else may enter
    (made so when ``create``): a socket in a shared place such as /tmp is trusted only there."""
    if create:
        import contextlib

        with contextlib.suppress(FileExistsError):
            os.mkdir(folder, 0o700)
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and stat.S_IMODE(st.st_mode) & 0o077 == 0)


def ranking_settings(settings: Settings) -> dict[str, Any]:
    """The fields of :data:`RANKING_FIELDS` as JSON values (tuples as lists)."""
    return {f: list(v) if isinstance(v := getattr(settings, f), tuple) else v
            for f in RANKING_FIELDS}


def ask_socket(path: Path, home: Path, request: dict[str, Any], *, timeout: float = 35.0,
               connect_timeout: float = 2.0) -> dict[str, Any] | None:
    """One JSON line to the socket at ``path`` and its one-line answer (a JSON object); None,
    logged, when nothing answers there (no file, a stale one, no answer in time, not JSON) or
    the socket lies outside ``home`` (a long path's fallback) in a folder not this user's alone.
    The C module ``_socket``: ``socket.py``'s enums and selectors cost a CLI ~3 ms."""
    answer = send_socket(path, home, request, timeout=timeout, connect_timeout=connect_timeout)
    return None if answer is None else answer()


def send_socket(path: Path, home: Path, request: dict[str, Any], *, timeout: float = 35.0,
                connect_timeout: float = 2.0, quiet: bool = False) -> Answer | None:
    """:func:`ask_socket` in two steps: the request sent, and an :class:`Answer` that reads its
    answer (called once), so the asker does its own work while the server does its; None when
    nothing took the request. ``quiet``: say nothing of a socket that did not answer (the CLI's
    question sent ahead, before logging is set up: the CLI asks again and says it then)."""
    import _socket as socket

    where = os.fspath(path)
    if not os.path.exists(where):
        return None
    folder = os.path.dirname(where)
    if folder != os.path.normpath(os.fspath(home)) and not private_dir(folder, create=False):
        _info("not asking %s: its folder is not this user's alone", path)
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(connect_timeout)
        sock.connect(where)
        sock.settimeout(timeout)
        sock.sendall(json_line(request))
    except OSError as exc:  # gone, stale socket file
        sock.close()
        if not quiet:
            _info("%s did not answer (%s)", path, exc)
        return None
    return Answer(path, sock)


def json_line(value: Any) -> bytes:
    """``json.dumps(value)`` and a newline, for a request of strings, whole numbers, booleans,
    None, lists and objects, without importing ``json`` (and ``re`` with it: ~7 ms of a CLI
    whose question goes out before them); anything else goes through ``json``."""
    try:
        return (_encoded(value) + "\n").encode()
    except TypeError:
        import json

        return (json.dumps(value, ensure_ascii=False) + "\n").encode()


def _encoded(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_encoded(v) for v in value) + "]"
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return "{" + ", ".join(f"{encode_basestring_ascii(k)}: {_encoded(v)}"
                               for k, v in value.items()) + "}"
    raise TypeError(type(value).__name__)


class Answer:
    """A request's answer, still in its socket: read it (a JSON object, or None, logged, when
    it does not come or is not one) or close it unread."""

    def __init__(self, path: Path, sock: Any) -> None:
        self.path, self._sock = path, sock

    def __call__(self) -> dict[str, Any] | None:
        import json

        sock = self._sock
        try:
            data = b""
            while not data.endswith(b"\n"):
                more = sock.recv(1 << 16)
                if not more:
                    break
                data += more
            answer = json.loads(data)
        except (OSError, ValueError) as exc:  # gone, no answer in time, cut answer
            _info("%s did not answer (%s)", self.path, exc)
            return None
        finally:
            sock.close()
        return answer if isinstance(answer, dict) else None

    def close(self) -> None:
        self._sock.close()


def asked_settings(request: dict[str, Any]) -> Any:
    """The ranking settings a request was asked with: its ``settings``, or the defaults' when it
    says ``defaults`` instead (the CLI's question sent before its settings were loaded,
    ``cli/early.py``)."""
    if "settings" not in request and request.get("defaults") is True:
        from mdsearch_ls.config import Settings

        return ranking_settings(Settings())
    return request.get("settings")


def _info(message: str, *args: object) -> None:
    """Logged at INFO, ``logging`` imported only then: a CLI whose search the server answers
    has nothing to log, and ``logging`` with what it brings is ~5 ms of it."""
    import logging

    logging.getLogger(__name__).info(message, *args, stacklevel=2)


def ask_to_leave(index_dir: Path, timeout: float = 35.0) -> bool:
    """Ask the process answering on ``index_dir``'s socket to give the index up; True once a
    background process has closed it (its writer lock is then free). A server a person started
    refuses, and no socket, a stale one or no answer is False: the caller meets the lock as it
    would have."""
    answer = ask_socket(resident_socket_path(index_dir), index_dir,
                        {"v": PROTOCOL_RESIDENT, "leave": True}, timeout=timeout)
    return answer is not None and answer.get("left") is True
