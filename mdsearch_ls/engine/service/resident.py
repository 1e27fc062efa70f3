"""A socket beside an index through which a CLI search asks the server that already holds it.

A search from a fresh process pays for Python, numpy, ONNX Runtime, the model and the index's
tables before it ranks anything (about 0.3 s of CPU that no code of ours can remove); a language
server or an MCP server that writes the index has all of that loaded. So the writer of an index
listens on ``<index dir>/search.sock`` (a Unix socket, owner-only, in the user's cache folder),
and ``mdsearch search`` asks there first: one JSON line in, one JSON line out. Nothing is started
for it: the socket exists only while a server the person started holds the index, it goes with
that server, and the ``resident`` setting turns it off.

The answer is the one an in-process search would print. The request is built by the same
``SearchRequest.build`` from the same arguments; the server refuses (and the CLI searches itself)
when its settings for the folder differ from the CLI's in anything that changes a ranking; and
before it searches, the server makes the freshness check the CLI would have made (a stat scan,
:func:`~mdsearch_ls.engine.index.freshness.pending_changes`) and brings the index up to date on
its writer thread, so an edit made a moment ago is found here as it would be there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import stat
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.errors import RequestError
from mdsearch_ls.engine.search.requests import SearchRequest
from mdsearch_ls.engine.states import FolderState

if TYPE_CHECKING:
    from mdsearch_ls.engine.service.folder import IndexedFolder

log = logging.getLogger(__name__)

SOCKET_NAME = "search.sock"
PROTOCOL_RESIDENT = 1
MAX_REQUEST = 1 << 20
"""A request is a query and a few options: anything longer is not one of ours."""
UPDATE_WAIT_S = 60.0
"""How long a request waits for the update it asked for before answering from what is there."""
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


class ResidentSearch:
    """The listening socket of one folder's index, served on threads of its own."""

    def __init__(self, folder: IndexedFolder, index_dir: Path) -> None:
        self.folder = folder
        self.index_dir = Path(index_dir)
        self.path = resident_socket_path(index_dir)
        self._sock: socket.socket | None = None
        self._closed = threading.Event()
        # A few long-lived threads, not one per request: each keeps its own SQLite connection
        # to the manifest, and a thread per request would leave one behind every time.
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="mdsearch-resident")

    @classmethod
    def open_for(cls, folder: IndexedFolder) -> ResidentSearch | None:
        """The socket of a folder whose index this process writes, listening; None for a
        reader (the writer's socket is the one to ask), with ``resident`` off, or when it
        cannot listen (that costs only speed: the CLI searches by itself)."""
        ws = folder.ws
        if ws is None or ws.read_only or not folder.settings.resident or folder.closed:
            return None
        resident = cls(folder, ws.index_dir)
        return resident if resident.start() else None

    def start(self) -> bool:
        """Listen (replacing a socket file no process answers on); False when it cannot, which
        costs nothing but speed: the CLI then searches by itself."""
        path = str(self.path)
        if self.path.parent != self.index_dir and not private_dir(self.path.parent,
                                                                   create=True):
            log.info("no search socket: %s is not a private folder of this user's",
                     self.path.parent)
            return False
        if self.path.exists() and _answers(path):
            log.info("no search socket: another process answers on %s", path)
            return False
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # owner-only from the moment it exists
        try:
            sock.bind(path)
            sock.listen(16)
        except OSError as exc:
            sock.close()
            log.info("no search socket at %s: %s", path, exc)
            return False
        finally:
            os.umask(old)
        sock.set_inheritable(False)
        self._sock = sock
        threading.Thread(target=self._accept, name="mdsearch-resident", daemon=True).start()
        log.info("%s: answering CLI searches on %s", self.folder.name, path)
        return True

    def _accept(self) -> None:
        sock = self._sock
        assert sock is not None
        while not self._closed.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                return  # closed
            try:
                self._pool.submit(self._serve, conn)
            except RuntimeError:  # shut down meanwhile
                conn.close()
                return

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            try:
                line = _read_line(conn)
                answer = self.answer(json.loads(line))
            except (OSError, ValueError) as exc:
                answer = {"v": PROTOCOL_RESIDENT, "refused": f"bad request: {exc}"}
            except Exception as exc:  # every request gets an answer; the CLI falls back
                log.exception("a CLI search through the socket failed")
                answer = {"v": PROTOCOL_RESIDENT, "refused": f"{type(exc).__name__}: {exc}"}
            with contextlib.suppress(OSError):  # a CLI gone mid-answer (Ctrl-C, | head)
                conn.sendall(json.dumps(answer, ensure_ascii=False).encode() + b"\n")

    def answer(self, req: dict[str, Any]) -> dict[str, Any]:
        """The search of one request, or why this server will not answer it (the CLI then
        searches by itself; a query the engine refuses is an answer too)."""
        if not isinstance(req, dict):
            return {"v": PROTOCOL_RESIDENT, "refused": "bad request: not a JSON object"}
        if req.get("v") != PROTOCOL_RESIDENT:
            return {"v": PROTOCOL_RESIDENT, "refused": f"protocol {req.get('v')!r}, this server "
                    f"speaks {PROTOCOL_RESIDENT}"}
        folder = self.folder
        ws = folder.ws
        if ws is None or ws.read_only or folder.closed:
            return {"v": PROTOCOL_RESIDENT, "refused": "the index is not open for writing here"}
        mine = ranking_settings(folder.settings)
        differ = sorted(k for k, v in (req.get("settings") or {}).items() if mine.get(k) != v)
        if differ or set(req.get("settings") or {}) != set(mine):
            return {"v": PROTOCOL_RESIDENT,
                    "refused": f"settings differ: {', '.join(differ) or 'keys'}"}
        if (req.get("update", True) and folder.state == FolderState.READY
                and ws.pending_changes()):
            # what the CLI's own search would have done first: bring the index up to date
            with contextlib.suppress(Exception):  # a failed update is the writer's to report
                folder.start_index().result(timeout=UPDATE_WAIT_S)
            ws = folder.ws if folder.ws is not None else ws
        results = []
        for q in req.get("queries") or []:
            try:
                request = SearchRequest.build(q.get("query"), k=q.get("k"), mode=q.get("mode"),
                                              filters=q.get("filters") or None,
                                              min_score=q.get("min_score"))
                result = folder.search(request)
            except RequestError as exc:
                results.append({"error": str(exc)})
                continue
            texts = ws.chunk_texts(h.chunk_id for h in result.hits if h.chunk_id)
            results.append({
                "hits": [{**h.to_json(explain=True), "chunk_id": h.chunk_id,
                          "keyword_rank": h.keyword_rank, "score": h.score,
                          "text": texts.get(h.chunk_id)} for h in result.hits],
                "notes": list(result.notes),
                "index": result.index.to_json(),
            })
        return {"v": PROTOCOL_RESIDENT, "pid": os.getpid(), "results": results}

    def close(self) -> None:
        self._closed.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()
            with contextlib.suppress(OSError):
                self.path.unlink()


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        more = conn.recv(65536)
        if not more:
            break
        data += more
        if len(data) > MAX_REQUEST:
            raise ValueError("request too long")
    return data


def _answers(path: str) -> bool:
    """Whether a live process listens on the socket file (a dead one leaves the file)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()
