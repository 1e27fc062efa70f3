"""A socket beside an index through which a CLI search asks the server that already holds it.

A search from a fresh process pays for Python, numpy, ONNX Runtime, the model and the index's
tables before it ranks anything (about 0.3 s of CPU that no code of ours can remove); a language
server or an MCP server that writes the index has all of that loaded. So the writer of an index
listens on ``<index dir>/search.sock`` (a Unix socket, owner-only, in the user's cache folder),
and ``mdsearch search`` asks there first: one JSON line in, one JSON line out. The socket exists
only while a process holds the index as its writer (a server the person started, or the
background process a search started and announced: :mod:`.background`), it goes with that
process, and the ``resident`` setting turns it off.

The answer is the one an in-process search would print. The request is built by the same
``SearchRequest.build`` from the same arguments; the server refuses (and the CLI searches itself)
when its settings for the folder differ from the CLI's in anything that changes a ranking; and
before it searches, the server brings the index up to date with the notes on its writer thread,
so an edit made a moment ago is found here as it would be there. Which notes changed it learns
from an inotify queue where it can (:mod:`~mdsearch_ls.engine.index.notewatch`: a stat of the
notes an event named, not of all 89,000), and otherwise from the CLI's own full look
(:func:`~mdsearch_ls.engine.index.freshness.changed_notes`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdsearch_ls.engine.errors import RequestError
from mdsearch_ls.engine.index.embed_queue import IndexReport
from mdsearch_ls.engine.index.freshness import TARGETED_MAX
from mdsearch_ls.engine.index.layout import FORMATS_META, formats_recorded, index_formats
from mdsearch_ls.engine.index.notewatch import NoteWatch
from mdsearch_ls.engine.search.preview import snippet_text
from mdsearch_ls.engine.search.requests import SearchRequest
from mdsearch_ls.engine.service.resident_rules import (
    PROTOCOL_RESIDENT,
    asked_settings,
    private_dir,
    ranking_settings,
    resident_socket_path,
    searches_printed_by,
)
from mdsearch_ls.engine.states import FolderState

if TYPE_CHECKING:
    from mdsearch_ls.engine.service.folder import IndexedFolder
    from mdsearch_ls.engine.workspace import Workspace

log = logging.getLogger(__name__)

MAX_REQUEST = 1 << 20
"""A request is a query and a few options: anything longer is not one of ours."""
FIRST_LOOK_WAIT_S = 10.0
"""How long a request waits for a look at the notes already under way; a first build takes
longer, and is searched as it is, saying so."""
UPDATE_WAIT_S = 60.0
"""How long a request waits for the update it asked for before answering from what is there."""


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
        self._looking = threading.Lock()
        self._watch: NoteWatch | None = None
        self.last_asked = time.monotonic()
        """When a request last came (``time.monotonic``): a background process leaves after
        a while without one."""

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
        sock = listen_private(self.path, self.index_dir)
        if sock is None:
            return False
        self._sock = sock
        self._watch = NoteWatch.for_root(self.folder.root)
        threading.Thread(target=self._accept, name="mdsearch-resident", daemon=True).start()
        log.info("%s: answering CLI searches on %s", self.folder.name, self.path)
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
                line = read_line(conn)
                answer = self.answer(json.loads(line))
            except (OSError, ValueError) as exc:
                answer = {"v": PROTOCOL_RESIDENT, "refused": f"bad request: {exc}"}
            except Exception as exc:  # every request gets an answer; the CLI falls back
                log.exception("a CLI search through the socket failed")
                answer = {"v": PROTOCOL_RESIDENT, "refused": f"{type(exc).__name__}: {exc}"}
            with contextlib.suppress(OSError):  # a CLI gone mid-answer (Ctrl-C, | head)
                conn.sendall(json.dumps(answer, ensure_ascii=False).encode() + b"\n")

    def answer(self, req: dict[str, Any]) -> dict[str, Any]:
        """The answer to one request (a search, an index run, ``status``, or a background process
        asked to leave), or why this server will not answer it (the CLI then does it by itself;
        a query the engine refuses is an answer too)."""
        if not isinstance(req, dict):
            return {"v": PROTOCOL_RESIDENT, "refused": "bad request: not a JSON object"}
        # these two whatever the version: a CLI of a newer release must still be able to see
        # and move aside the background process an older one started
        if req.get("who"):
            return {"v": PROTOCOL_RESIDENT, "pid": os.getpid(),
                    "background": self.folder.on_leave is not None}
        if req.get("leave"):
            return self._leave()
        if req.get("v") != PROTOCOL_RESIDENT:
            return {"v": PROTOCOL_RESIDENT, "refused": f"protocol {req.get('v')!r}, this server "
                    f"speaks {PROTOCOL_RESIDENT}"}
        self.last_asked = time.monotonic()
        folder = self.folder
        ws = folder.ws
        if ws is None or ws.read_only or folder.closed:
            return {"v": PROTOCOL_RESIDENT, "refused": "the index is not open for writing here"}
        mine = ranking_settings(folder.settings)
        theirs = asked_settings(req)
        theirs = theirs if isinstance(theirs, dict) else {}
        differ = sorted(k for k, v in theirs.items() if mine.get(k) != v)
        if differ or set(theirs) != set(mine):
            return {"v": PROTOCOL_RESIDENT,
                    "refused": f"settings differ: {', '.join(differ) or 'keys'}"}
        if req.get("index"):
            return self._index(ws)
        if req.get("status"):  # what `mdsearch status` reads, as it stands: no look first
            return {"v": PROTOCOL_RESIDENT, "pid": os.getpid(),
                    "background": folder.on_leave is not None, "status": ws.status()}
        if req.get("update", True) and folder.state in (FolderState.INDEXING,
                                                         FolderState.LOADING_MODEL):
            # A look at the notes under way (a server's first scan, a folder a background
            # process just took): usually a second or two. Waited for, briefly, rather than
            # answering "still being built" about an index that is whole on disk.
            with contextlib.suppress(Exception):
                folder.settled().result(timeout=FIRST_LOOK_WAIT_S)
        checked = "not asked" if not req.get("update", True) else "index still being built"
        if req.get("update", True) and folder.state == FolderState.READY:
            ws, checked, _ = self._bring_up_to_date(ws)
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
                          "text": (md := texts.get(h.chunk_id)),
                          # rendered here: the client then needs no markdown parser (~16 ms)
                          "plain": None if md is None else snippet_text(md)}
                         for h in result.hits],
                "notes": list(result.notes),
                "index": result.index.to_json(),
            })
        answer = {"v": PROTOCOL_RESIDENT, "pid": os.getpid(), "checked": checked,
                  "results": results,
                  # a CLI not given --include-formats takes these, as it would from the manifest
                  "index_formats": _formats(ws, folder)}
        spec = req.get("render")
        renderer = searches_printed_by()
        if isinstance(spec, dict) and renderer is not None:
            try:
                rendered = renderer(spec, answer, folder.root)
            except Exception:  # the CLI then prints the answer itself, as it always could
                log.exception("printing a search for the CLI failed")
                rendered = None
            if rendered is not None:
                answer["rendered"] = rendered
        return answer

    def _leave(self) -> dict[str, Any]:
        """A background process closes its folder before it answers, so the asker holds the
        writer lock's freedom in its hand when the answer comes, without polling for it."""
        # Set by a background process (:mod:`.background`), which exists only to answer here
        # and so gives way to whatever asks; a server a person started never leaves on request.
        leave = self.folder.on_leave
        if leave is None:
            return {"v": PROTOCOL_RESIDENT, "refused": "not a background process: a server a "
                    "person started keeps its index"}
        log.info("%s: asked to leave (another mdsearch process needs the index)",
                 self.folder.name)
        if not leave():
            return {"v": PROTOCOL_RESIDENT, "refused": "the index did not close in time"}
        return {"v": PROTOCOL_RESIDENT, "pid": os.getpid(), "left": True}

    def _index(self, ws: Workspace) -> dict[str, Any]:
        """``mdsearch index`` answered here: the same look as before a search, and the report
        of what it wrote (the report a run in the CLI would print). Refused while the first
        build runs: the CLI then says who holds the index, as before."""
        if self.folder.state != FolderState.READY:
            return {"v": PROTOCOL_RESIDENT, "refused": "index still being built"}
        started = time.perf_counter()
        ws, checked, report = self._bring_up_to_date(ws)
        if report is None:
            raise RuntimeError("the index could not be brought up to date here")
        status = ws.status()
        report.files_total, report.chunks_total = int(status["files"]), int(status["chunks"])
        if not (report.files_indexed or report.files_deleted or report.files_skipped):
            report.files_unchanged = report.files_total
        report.seconds = time.perf_counter() - started
        return {"v": PROTOCOL_RESIDENT, "pid": os.getpid(), "checked": checked,
                "summary": report.summary(), "warnings": list(report.warnings),
                "changed": bool(report.files_indexed or report.files_deleted
                                or report.chunks_written)}

    def _bring_up_to_date(self, ws: Workspace) -> tuple[Workspace, str, IndexReport | None]:
        """What the CLI's own search would have done first: bring the index up to date with the
        notes. The watch names the notes to look at; where it cannot (or there is none) every
        note is looked at, as the CLI would. One request looks at a time; the next finds it
        done. Also says how the notes were checked (the CLI's log shows it), and what was
        written (None when the update failed and the index is searched as it is)."""
        folder, watch = self.folder, self._watch
        report: IndexReport | None = None
        with self._looking:
            touched = watch.touched() if watch is not None else None
            if watch is not None and touched is None:
                watch.start_full_look()
            changed = ws.changed_notes(among=touched, watch=watch if touched is None else None)
            checked = ("every note" if touched is None else f"only what its watch named "
                       f"({len(touched)} file{'' if len(touched) == 1 else 's'})")
            try:
                if changed is not None and len(changed) <= TARGETED_MAX:
                    # on the writer thread, in turn with the folder's other writes; the
                    # update's own report is the one `mdsearch index` prints
                    report = (folder.submit(_update, folder, changed)
                              .result(timeout=UPDATE_WAIT_S) if changed else IndexReport())
                    if changed and ws.changed_notes(among=changed):
                        raise RuntimeError("the update left notes behind")
                else:
                    report = folder.start_index().result(timeout=UPDATE_WAIT_S)
            except Exception as exc:  # the writer reports its failure; searched as it is
                log.info("%s: searching without the update: %s", folder.name, exc)
                report = None
                if watch is not None:
                    watch.distrust()
            else:
                if watch is not None and touched is None:
                    watch.full_look_done()
                elif watch is not None and touched is not None:
                    watch.settled(touched)
        return (folder.ws if folder.ws is not None else ws), checked, report

    def close(self) -> None:
        self._closed.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._watch is not None:
            self._watch.close()
        sock, self._sock = self._sock, None
        close_listening(sock, self.path)


def _formats(ws: Workspace, folder: IndexedFolder) -> tuple[str, ...] | None:
    """The formats the index records, read on the folder's own connection (a new one cost 2-3
    ms a request); from the file, as a CLI reads them, if that connection cannot."""
    try:
        return formats_recorded(ws.manifest.get_meta(FORMATS_META))
    except Exception:  # a manifest closing under the request
        return index_formats(folder.root, folder.settings)


def _update(folder: IndexedFolder, changed: list[str]) -> IndexReport:
    """The named notes written (or dropped); writer thread only."""
    ws = folder.ws
    if ws is None or ws.read_only or folder.closed:
        raise RuntimeError("the index is not open for writing here")
    return ws.update(changed)


def listen_private(path: Path, home: Path) -> socket.socket | None:
    """A Unix socket listening at ``path``, owner-only from the moment it exists; None when it
    cannot (another live process answers there, a shared folder, a bind error), which costs
    only speed. ``home``: the folder the socket belongs beside; anywhere else (a long path's
    fallback in the temp folder) its folder must be this user's alone. A socket file no process
    answers on is replaced."""
    if path.parent != home and not private_dir(path.parent, create=True):
        log.info("no socket: %s is not a private folder of this user's", path.parent)
        return None
    if path.exists() and answers(path):
        log.info("no socket: another process answers on %s", path)
        return None
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sock.bind(str(path))
        sock.listen(16)
    except OSError as exc:
        sock.close()
        log.info("no socket at %s: %s", path, exc)
        return None
    finally:
        os.umask(old)
    sock.set_inheritable(False)
    return sock


def close_listening(sock: socket.socket | None, path: Path) -> None:
    """Stop listening and take the socket file away, so no client finds a dead socket there."""
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.close()
        with contextlib.suppress(OSError):
            path.unlink()


def read_line(conn: socket.socket) -> bytes:
    """One request line (at most :data:`MAX_REQUEST` bytes)."""
    data = b""
    while not data.endswith(b"\n"):
        more = conn.recv(65536)
        if not more:
            break
        data += more
        if len(data) > MAX_REQUEST:
            raise ValueError("request too long")
    return data


def answers(path: Path) -> bool:
    """Whether a live process listens on the socket file (a dead one leaves the file)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1)
    try:
        probe.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        probe.close()
