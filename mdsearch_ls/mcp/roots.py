"""The notes an MCP server serves: one or more folders, kept indexed, searched as one set.

Protocol-free (the tools in :mod:`mdsearch_ls.mcp.tools` turn its answers into MCP results), so
it can be driven in-process by tests. Everything slow happens in the background: importing the
engine, loading the model, opening each index and its first index run all start when the server
starts and never hold up ``initialize``; a request that needs them waits for them with a deadline
and otherwise answers with what there is and the state of the index.

Paths: with one root, a note's path is its path relative to that root. With several, it is
``<folder name>/<path>``, the folder name being the root's own name (``notes``, ``notes-2`` when
two roots share one). Every path a caller gives is resolved to exactly one folder or refused.

Several roots are one searchable set: each folder answers the query with its own ranking, and
the lists are merged by the engine's ``merge_rankings`` (each folder's order kept, the most
similar head first), exactly as the language server merges its workspace folders.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mdsearch_ls.config import Settings

log = logging.getLogger(__name__)

# How long a request waits for what the background start is doing before it answers with what
# there is: the engine import and opening an index take a second or two, the model longer. A
# search waits for the model at most MODEL_WAIT_S from its arrival, then answers by keywords
# (and says so): an assistant's first question usually comes seconds after the start anyway.
START_WAIT_S = 30.0
OPEN_WAIT_S = 30.0
MODEL_WAIT_S = 15.0


class LibraryError(Exception):
    """Something a tool caller should read (a refused path, a bad argument); the message is
    written for a person."""


@dataclass
class Progress:
    """When a folder's index run started and how far it got, for an estimate of the rest."""

    started: float = 0.0
    first_t: float = 0.0
    first_done: int = 0
    t: float = 0.0
    done: int = 0
    total: int = 0

    def record(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.first_t and done > 0:
            self.first_t, self.first_done = now, done
        self.t, self.done, self.total = now, done, total

    def eta(self) -> float | None:
        """Seconds left at the rate so far, None until there is a rate."""
        if not self.first_t or self.t <= self.first_t or self.done <= self.first_done:
            return None
        rate = (self.done - self.first_done) / (self.t - self.first_t)
        return max(0.0, (self.total - self.done) / rate)


@dataclass
class Folder:
    """One root: its display name, its :class:`IndexedFolder` and its progress."""

    root: Path
    name: str
    indexed: Any  # mdsearch_ls.engine.api.IndexedFolder, imported in the background
    progress: Progress = field(default_factory=Progress)
    retry: threading.Timer | None = None
    other_builds: bool = False
    """Another process is building this index from nothing; we search it once it exists."""


@dataclass
class Located:
    """A path a caller gave, resolved: the folder and the note's path inside it."""

    folder: Folder
    rel: str


@dataclass
class FoundHit:
    """A hit with its folder, so it can be shown with an unambiguous path."""

    folder: Folder
    hit: Any  # mdsearch_ls.engine.api.Hit


class Library:
    """The folders a server was started with, their indexes, the shared model, the watcher."""

    def __init__(
        self, roots: Iterable[Path | str], settings: Settings, *, embedder: Any = None
    ) -> None:
        """``embedder``: the model to use instead of the one the settings name (tests)."""
        self.settings = settings
        resolved: list[Path] = []
        for r in roots:
            p = Path(r).expanduser().resolve()
            if p not in resolved:
                resolved.append(p)
        self.roots = resolved
        self.names = _names(resolved)
        self.folders: list[Folder] = []
        self.embedder: Any = embedder
        self.model_error: str | None = None
        self.start_error: str | None = None
        self._started = threading.Event()
        self._model_ready = threading.Event()
        self._closed = False
        self.watcher: Any = None
        self.changes_seen = 0
        self.last_change: float | None = None

    # ---- starting ---------------------------------------------------------------------------

    def start(self, *, watch: bool = True) -> None:
        """Start everything slow on a background thread; returns at once."""
        threading.Thread(target=self._start, args=(watch,), name="mdsearch-start",
                         daemon=True).start()

    def _start(self, watch: bool) -> None:
        try:
            from mdsearch_ls.engine.api import IndexedFolder, create_embedder, load_in_background

            if self.embedder is None:
                self.embedder = create_embedder(self.settings)
            load_in_background(self.embedder, self._model_loaded)
            for root in self.roots:
                name = self.names[root]
                folder = Folder(root, name, None)
                settings = self.settings
                if settings.index_dir and self.multi:
                    # One --index-dir for several roots: a subfolder each (one index per root).
                    settings = dataclasses.replace(
                        settings, index_dir=str(Path(settings.index_dir) / name))
                folder.indexed = IndexedFolder(
                    root, settings, self.embedder, name=name,
                    on_message=lambda text, level: log.info("%s", text),
                )
                self.folders.append(folder)
        except Exception as exc:
            log.exception("mdsearch could not start")
            self.start_error = str(exc)
            self._started.set()
            return
        self._started.set()
        for folder in self.folders:
            self._index(folder)
        if watch and not self._closed:
            from mdsearch_ls.mcp.watch import Watcher

            self.watcher = Watcher(self)
            self.watcher.start()
        from mdsearch_ls.mcp.tokens import counter

        counter().load()

    def _model_loaded(self, error: Exception | None) -> None:
        if error is not None:
            self.model_error = str(error)
            log.error("%s", error)
        else:
            log.info("embedding model %s loaded", self.embedder.name)
        self._model_ready.set()

    def _index(self, folder: Folder) -> None:
        """Bring a folder's index up to date on its writer thread; when another process is
        building it from nothing, try again later (this one searches it once it exists)."""
        from mdsearch_ls.engine.api import IndexLockedError

        folder.progress = Progress(started=time.monotonic())
        future = folder.indexed.start_index(
            progress=lambda done, total, chunks: folder.progress.record(done, total)
        )

        def done(f: Any) -> None:
            if f.cancelled() or self._closed:
                return
            exc = f.exception()
            folder.other_builds = isinstance(exc, IndexLockedError)
            if folder.other_builds:
                folder.retry = threading.Timer(5.0, self._index, args=(folder,))
                folder.retry.daemon = True
                folder.retry.start()

        future.add_done_callback(done)

    def wait_started(self, timeout: float = START_WAIT_S) -> None:
        if not self._started.wait(timeout):
            raise LibraryError("mdsearch is still starting (loading the search engine); "
                               "try again in a few seconds")
        if self.start_error:
            raise LibraryError(f"mdsearch could not start: {self.start_error}")

    @property
    def model_loaded(self) -> bool:
        return self.embedder is not None and bool(getattr(self.embedder, "loaded", True))

    def wait_model(self, timeout: float = MODEL_WAIT_S) -> bool:
        """Whether the model is loaded, after waiting for it at most ``timeout``."""
        if self.model_loaded:
            return True
        self._model_ready.wait(timeout)
        return self.model_loaded

    # ---- paths ------------------------------------------------------------------------------

    @property
    def multi(self) -> bool:
        return len(self.roots) > 1

    def display(self, folder: Folder, rel: str) -> str:
        """The path a caller sees (and gives back)."""
        return f"{folder.name}/{rel}" if self.multi else rel

    def locate(self, path: Any) -> Located:
        """Resolve a caller's path to one folder and a relative path inside it, or refuse it.

        Accepted: the paths results show, a path relative to a root, and an absolute path inside
        a root. Nothing outside the roots is ever resolved (``..`` is normalised first)."""
        self.wait_started()
        if not isinstance(path, str) or not path.strip():
            raise LibraryError("'path' must be the path of a note, as search results show it")
        raw = path.strip()
        if raw.startswith("file://"):
            from urllib.parse import unquote, urlparse

            raw = unquote(urlparse(raw).path)
        candidates: list[Located] = []
        if os.path.isabs(raw) or raw.startswith("~"):
            p = Path(raw).expanduser()
            # The deepest root wins when roots are nested.
            for folder in sorted(self.folders, key=lambda f: -len(f.root.parts)):
                rel = folder.indexed.note_path(p)
                if rel:
                    return Located(folder, rel)
            raise LibraryError(f"{path} is outside the folders this server reads "
                               f"({', '.join(str(r) for r in self.roots)})")
        first, _, rest = raw.replace("\\", "/").lstrip("./").partition("/")
        for folder in self.folders:
            if self.multi and first == folder.name and rest:
                rel = folder.indexed.note_path(rest)
                if rel:
                    candidates.append(Located(folder, rel))
        for folder in self.folders:
            rel = folder.indexed.note_path(raw)
            if rel:
                candidates.append(Located(folder, rel))
            if not self.multi and first == folder.name and rest:
                rel = folder.indexed.note_path(rest)  # "vault/x.md" for the root named vault
                if rel:
                    candidates.append(Located(folder, rel))
        if not candidates:
            raise LibraryError(f"{path} is outside the folders this server reads "
                               f"({', '.join(str(r) for r in self.roots)})")
        for c in candidates:
            if (c.folder.root / c.rel).exists():
                return c
        return candidates[0]

    # ---- reading ----------------------------------------------------------------------------

    def read(self, path: Any) -> tuple[Located, str]:
        """A note's text (any of the accepted path forms); refuses what ``read_note`` refuses."""
        from mdsearch_ls.engine.api import RequestError

        loc = self.locate(path)
        try:
            rel, text = loc.folder.indexed.read_note(loc.rel)
        except RequestError as exc:
            raise LibraryError(str(exc)) from None
        return Located(loc.folder, rel), text

    def notes(self) -> list[tuple[Folder, str]]:
        """Every indexed note, by folder."""
        if not self._started.is_set() or self.start_error:
            return []
        return [(f, rel) for f in self.folders for rel in f.indexed.notes()]

    # ---- searching --------------------------------------------------------------------------

    def _wait_open(self) -> None:
        deadline = time.monotonic() + OPEN_WAIT_S
        for folder in self.folders:
            folder.indexed.wait_open(max(0.0, deadline - time.monotonic()))

    def search(
        self,
        query: Any,
        *,
        limit: Any,
        mode: Any,
        filters: dict[str, Any],
        default_limit: int,
    ) -> tuple[list[FoundHit], list[str], str]:
        """Hits of all folders merged (see the module docstring), notes for the caller, and the
        mode that was used. Raises RequestError (from the engine) for a bad request."""
        from mdsearch_ls.engine.api import SearchRequest

        asked = time.monotonic()
        request = SearchRequest.build(query, k=limit, mode=mode, filters=filters or None,
                                      default_k=default_limit)
        if request.empty:
            raise LibraryError("the query has no words to search for (filters alone do not "
                               "rank anything): add some text")
        self.wait_started()
        self._wait_open()
        notes = list(request.notes)
        used = request.mode or self.settings.mode
        if used != "keyword" and not self.wait_model(max(0.0, asked + MODEL_WAIT_S
                                                         - time.monotonic())):
            why = (f"the embedding model could not be loaded ({self.model_error})"
                   if self.model_error else "the embedding model is still loading")
            notes.append(f"{why}: these are keyword matches only; ask again for ranking by "
                         f"meaning")
            used = "keyword"
        lists: list[list[FoundHit]] = []
        path_filter = (filters or {}).get("path")
        for folder in self.folders:
            own = dict(filters or {})
            if self.multi and path_filter:
                routed = self._route_paths(folder, path_filter)
                if routed is None:
                    continue  # the path filter names other folders only
                if routed:
                    own["path"] = routed
                else:
                    del own["path"]  # "name/": all of this folder
            req = SearchRequest.build(query, k=request.k, mode=used, filters=own or None,
                                      min_score=request.min_score)
            result = folder.indexed.search(req)
            lists.append([FoundHit(folder, h) for h in result.hits])
        return merge(lists, request.k), notes, used

    def _route_paths(self, folder: Folder, values: Any) -> list[str] | None:
        """The ``path`` filter values meant for this folder: ``name/sub/`` is this folder's
        ``sub/``; a value naming no folder applies to every folder."""
        values = [values] if isinstance(values, str) else list(values)
        names = {f.name for f in self.folders}
        mine: list[str] = []
        whole = False
        for v in values:
            head, _, rest = str(v).partition("/")
            if head in names:
                if head == folder.name:
                    if rest:
                        mine.append(rest)
                    else:
                        whole = True
            else:
                mine.append(v)
        if whole:
            return []
        return mine or None

    def related(self, path: Any, line: int, limit: Any, min_score: float) -> tuple[Located, Any]:
        """The section at ``line`` (0-based) of a note, and sections of other notes like it
        (from the note's own folder)."""
        from mdsearch_ls.engine.api import RelatedRequest

        loc, text = self.read(path)
        request = RelatedRequest.build(loc.rel, line, text=text, k=limit, min_score=min_score)
        self._wait_open()
        if not self.wait_model():
            raise LibraryError("the embedding model is still loading; related sections need it. "
                               "Try again in a few seconds" if not self.model_error else
                               f"the embedding model could not be loaded: {self.model_error}")
        return loc, loc.folder.indexed.related(request)

    # ---- updating ---------------------------------------------------------------------------

    def update(self, paths: list[str], timeout: float = 30.0) -> list[dict[str, str]]:
        """Reindex these notes now (a deleted one is dropped); one status per path given."""
        from mdsearch_ls.engine.api import is_markdown

        self.wait_started()
        self._wait_open()
        out: list[dict[str, str]] = []
        queued: list[tuple[int, Located, str]] = []
        for given in paths:
            try:
                loc = self.locate(given)
            except LibraryError as exc:
                out.append({"path": str(given), "status": f"refused: {exc}"})
                continue
            full = loc.folder.root / loc.rel
            if full.is_dir():
                rels = _notes_under(loc, is_markdown)
                for rel in rels:
                    loc.folder.indexed.queue(rel, "update")
                    queued.append((len(out), Located(loc.folder, rel), "update"))
                out.append({"path": self.display(loc.folder, loc.rel) or given,
                            "status": f"folder: {len(rels)} notes queued"})
                continue
            if not is_markdown(loc.rel):
                out.append({"path": self.display(loc.folder, loc.rel),
                            "status": "refused: not a markdown note (.md, .markdown)"})
                continue
            op = "update" if full.is_file() else "delete"
            loc.folder.indexed.queue(loc.rel, op)
            queued.append((len(out), loc, op))
            out.append({"path": self.display(loc.folder, loc.rel), "status": "queued"})
        # The writer thread runs jobs in order: a no-op submitted now finishes after them.
        barriers = {id(q[1].folder): q[1].folder.indexed.submit(lambda: None) for q in queued}
        deadline = time.monotonic() + timeout
        for fut in barriers.values():
            with contextlib.suppress(Exception):
                fut.result(max(0.0, deadline - time.monotonic()))
        for i, loc, op in queued:
            st = out[i]["status"]
            if st.startswith("folder:"):
                continue
            status = loc.folder.indexed.status()
            fut = barriers[id(loc.folder)]
            if status["read_only"]:
                out[i]["status"] = ("not indexed here: another mdsearch process (an editor) "
                                    "writes this index and indexes the change itself")
            elif not fut.done():
                out[i]["status"] = "queued: the index is busy (first index); it is included"
            elif op == "delete":
                out[i]["status"] = "removed (the file no longer exists)"
            elif loc.folder.indexed.is_indexed(loc.rel):
                out[i]["status"] = "indexed"
            else:
                out[i]["status"] = ("not indexed: excluded by the settings or .gitignore, "
                                    "empty, or unreadable")
        return out

    # ---- status -----------------------------------------------------------------------------

    def index_state(self) -> dict[str, Any]:
        """One ``{"state", "files_done", "files_total"}`` over all folders (plus
        ``eta_seconds`` while building, when there is a rate)."""
        if not self._started.is_set():
            return {"state": "building", "files_done": 0, "files_total": 0}
        if self.start_error:
            return {"state": "error", "files_done": 0, "files_total": 0}
        states, done, total, etas = [], 0, 0, []
        for folder in self.folders:
            st = folder.indexed.index_state()
            if folder.other_builds:
                states.append("building")
                continue
            if folder.indexed.state == "error":
                states.append("error")
                continue
            states.append(st.state)
            done += st.files_done
            total += st.files_total
            eta = folder.progress.eta()
            if st.state == "building" and eta is not None:
                etas.append(eta)
        if not states:
            state = "empty"
        elif "building" in states:
            state = "building"
        elif all(s == "empty" for s in states):
            state = "empty"
        elif "interrupted" in states:
            state = "interrupted"
        elif all(s == "error" for s in states):
            state = "error"
        else:
            state = "ready"
        out: dict[str, Any] = {"state": state, "files_done": done, "files_total": total}
        if etas:
            out["eta_seconds"] = round(max(etas), 1)
        return out

    def status(self) -> dict[str, Any]:
        from mdsearch_ls.mcp.tokens import counter

        folders = []
        if self._started.is_set() and not self.start_error:
            for folder in self.folders:
                st = folder.indexed.status()
                folders.append({
                    "name": folder.name,
                    "root": str(folder.root),
                    "state": st["state"],
                    "index": st["index"],
                    "files": st["files"],
                    "chunks": st["chunks"],
                    "read_only": st["read_only"],
                    "queue": st["queue"],
                    "last_update": st["last_update"],
                    "index_dir": st["index_dir"],
                    "last_error": st["last_error"],
                })
        if self.model_error:
            model_state = "error"
        elif self.model_loaded:
            model_state = "loaded"
        else:
            model_state = "loading"
        return {
            "index": self.index_state(),
            "folders": folders,
            "model": {"name": getattr(self.embedder, "name", None), "state": model_state,
                      "error": self.model_error},
            "watching": bool(self.watcher is not None and self.watcher.alive),
            "changes_seen": self.changes_seen,
            "last_change": _iso(self.last_change) if self.last_change else None,
            "token_estimate": counter().name,
            "start_error": self.start_error,
        }

    # ---- changes on disk (the watcher) ---------------------------------------------------------

    def folder_of(self, path: Path) -> tuple[Folder, str] | None:
        """The folder (deepest root) holding an absolute path, and the path inside it."""
        for folder in sorted(self.folders, key=lambda f: -len(f.root.parts)):
            rel = folder.indexed.note_path(path)
            if rel:
                return folder, rel
        return None

    def changed(self, events: Iterable[tuple[Path, bool]]) -> None:
        """Watcher events (path, still exists): queue each note to its folder's writer.

        Whether a note is updated or deleted is decided by the disk now, not by the event's
        kind: an editor's atomic save (write a temporary file, rename it over the note) arrives
        as a delete and an add in one batch, in no useful order.
        """
        from mdsearch_ls.engine.api import is_markdown

        ignores: set[int] = set()
        for path, exists in events:
            found = self.folder_of(path)
            if found is None:
                continue
            folder, rel = found
            if path.name == ".gitignore":
                ignores.add(id(folder))
                continue
            if is_markdown(rel):
                folder.indexed.queue(rel, "update" if exists else "delete")
            elif exists and path.is_dir():
                for note in _notes_under(Located(folder, rel), is_markdown):
                    folder.indexed.queue(note, "update")
            elif not exists and any(n.startswith(rel + "/") for n in folder.indexed.notes()):
                folder.indexed.queue(rel, "delete")  # a folder of notes went away
            else:
                continue
            self.changes_seen += 1
            self.last_change = time.time()
        for folder in self.folders:
            if id(folder) in ignores:
                folder.indexed.refresh_ignores()
                self._index(folder)  # a changed .gitignore can add or drop any note

    # ---- closing ----------------------------------------------------------------------------

    def close(self, timeout: float = 3.0) -> bool:
        """Stop the watcher and close every index; False when a writer did not stop within
        ``timeout`` (the caller then abandons them: the next open repairs any half-write)."""
        self._closed = True
        if self.watcher is not None:
            self.watcher.stop()
        for folder in self.folders:
            if folder.retry is not None:
                folder.retry.cancel()
        threads = []
        for folder in self.folders:
            t = threading.Thread(target=folder.indexed.close, daemon=True,
                                 name=f"close-{folder.name}")
            t.start()
            threads.append(t)
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        if any(t.is_alive() for t in threads):
            for folder in self.folders:
                folder.indexed.abandon()
            return False
        return True


def merge(lists: list[list[FoundHit]], k: int) -> list[FoundHit]:
    """Per-folder rankings as one list: the engine's merge, which every front end uses."""
    from mdsearch_ls.engine.api import merge_rankings

    return merge_rankings(lists, k, lambda h: h.hit.score)


def _names(roots: list[Path]) -> dict[Path, str]:
    names: dict[Path, str] = {}
    used: set[str] = set()
    for root in roots:
        base = root.name or "root"
        name, n = base, 2
        while name in used:
            name, n = f"{base}-{n}", n + 1
        used.add(name)
        names[root] = name
    return names


def _notes_under(loc: Located, is_markdown: Callable[[str], bool]) -> list[str]:
    """Notes the index would take under a folder of a root (symlinks out are not followed)."""
    base = loc.folder.root / loc.rel
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for name in sorted(filenames):
            rel = Path(dirpath, name).relative_to(loc.folder.root).as_posix()
            if is_markdown(rel) and loc.folder.indexed.accepts(rel):
                out.append(rel)
    return out


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ts))
