"""What ``mdsearch search`` and the server that holds an index must agree on to talk through the
index's socket: where the socket is, when its folder may be trusted, which settings must match,
and the protocol's version. The server's side is :mod:`mdsearch_ls.engine.service.resident`.

Apart from it because the CLI reads these before it knows whether a server answers, and the
server's module brings threads, a thread pool, ``tempfile`` and the search request types with
it (about 8 ms of imports in a process that is over in a few tens when the server answers).
Standard library only; ``tempfile`` and ``hashlib`` (which loads OpenSSL: ~3 ms) are imported
only for an index folder whose socket path is too long. ``tests/unit/test_resident_client.py``
holds both sides to the same answers.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mdsearch_ls.config import Settings

SOCKET_NAME = "search.sock"
PROTOCOL_RESIDENT = 1
RANKING_FIELDS = ("include", "exclude", "include_formats", "model", "embedder_backend",
                  "chunk_size", "chunk_overlap", "fusion", "per_file", "max_file_bytes",
                  "max_chunks_per_file")
"""Settings that change which notes are searched or how they rank: the CLI's and the server's
must agree for the server's answer to be the CLI's."""


def resident_socket_path(index_dir: Path) -> Path:
    """``<index dir>/search.sock``; where that path is too long for a Unix socket (104 bytes on
    macOS, 108 on Linux), ``<tmp>/mdsearch-<uid>/<hash of the index dir>.sock`` instead, in a
    folder only this user owns (:func:`private_dir` checks it before either side uses it)."""
    path = Path(index_dir) / SOCKET_NAME
    if len(os.fsencode(str(path))) < 100:
        return path
    import hashlib  # only for a long path: they cost a few ms (OpenSSL, shutil, random)
    import tempfile

    digest = hashlib.sha256(os.fsencode(str(Path(index_dir)))).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"mdsearch-{os.getuid()}" / f"{digest}.sock"


def private_dir(folder: Path, *, create: bool) -> bool:
    """Whether ``folder`` is a real directory of this user's that nobody else may enter
    (made so when ``create``): a socket in a shared place such as /tmp is trusted only there."""
    if create:
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=0o700)
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


def ask_to_leave(index_dir: Path, timeout: float = 35.0) -> bool:
    """Ask the process answering on ``index_dir``'s socket to give the index up; True once a
    background process has closed it (its writer lock is then free). A server a person started
    refuses, and no socket, a stale one or no answer is False: the caller meets the lock as it
    would have."""
    import json
    import socket

    path = resident_socket_path(index_dir)
    if not path.exists() or (path.parent != Path(index_dir)
                             and not private_dir(path.parent, create=False)):
        return False
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2.0)
        sock.connect(str(path))
        sock.settimeout(timeout)
        sock.sendall(json.dumps({"v": PROTOCOL_RESIDENT, "leave": True}).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            more = sock.recv(4096)
            if not more:
                break
            data += more
        answer = json.loads(data)
    except (OSError, ValueError):
        return False
    finally:
        sock.close()
    return isinstance(answer, dict) and answer.get("left") is True
