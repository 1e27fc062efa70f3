"""The notes an MCP server serves: one or more folders, kept indexed, searched as one set.

Protocol-free (the tools in :mod:`mdsearch_ls.mcp.tools` turn its answers into MCP results), so
it can be driven in-process by tests. Everything slow happens in the background: importing the
engine, loading the model, opening each index and its first index run all start when the library
is made and never hold up ``initialize``; a request that needs them waits for them with a
deadline and otherwise answers with what there is and the state of the index. (So the engine is
imported inside the methods that run after that start, never at the top of this module.)

Paths: with one root, a note's path is its path relative to that root. With several, it is
``<folder name>/<path>``, the folder name being the root's own name (``notes``, ``notes-2`` when
two roots share one). Every path a caller gives is resolved to exactly one folder or refused.

Several roots are one searchable set: the engine's :class:`Folders` keeps them, searches each
and merges the rankings exactly as it does for the language server's workspace folders.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from mdsearch_ls.config import Settings
from mdsearch_ls.mcp.answers import ToolInputError
from mdsearch_ls.mcp.tokens import counter

log = logging.getLogger(__name__)

# How long a request waits for what the background start is doing before it answers with what
# there is: the engine import and opening an index take a second or two, the model longer. A
# search waits for the model at most MODEL_WAIT_S from its arrival, then answers by keywords
# (and says so): an assistant's first question usually comes seconds after the start anyway.
START_WAIT_S = 30.0
OPEN_WAIT_S = 30.0
MODEL_WAIT_S = 15.0


@dataclass
class Located:
    """A path a caller gave, resolved: the folder and the note's path inside it."""

    folder: Any  # mdsearch_ls.engine.api.IndexedFolder
    rel: str


MAX_PATH_CHARS = 4096
"""Longer than any path a file system takes (Linux PATH_MAX): such an argument is refused before
it reaches the OS, whose error would quote it whole."""


class Library:
    """The folders a server was started with, as the engine's :class:`Folders` keeps them, seen
    through the paths a caller gives and gets."""

    def __init__(
        self, roots: Iterable[Path | str], settings: Settings, *, embedder: Any = None,
        remote: bool = False, watch: bool = True,
    ) -> None:
        """Starts everything slow on a background thread and returns at once. ``embedder``: the
        model to use instead of the one the settings name (tests). ``remote``: callers are on
        other machines (HTTP), so answers never show this machine's paths: a folder is its
        name. ``watch``: learn of changes on disk (tests that change nothing turn it off)."""
        self.settings = settings
        self.remote = remote
        self.roots = list(dict.fromkeys(Path(r).expanduser().resolve() for r in roots))
        self.names = _names(self.roots)
        self.service: Any = None  # mdsearch_ls.engine.api.Folders, made in the background
        self.folders: list[Any] = []  # its IndexedFolders, in the order of the roots
        self.start_error: str | None = None
        self._started = threading.Event()
        threading.Thread(target=self._start, args=(embedder, watch), name="mdsearch-start",
                         daemon=True).start()

    def _start(self, embedder: Any, watch: bool) -> None:
        try:
            from mdsearch_ls.engine.api import Folders

            self.service = Folders(self.settings, embedder=embedder, watch=watch,
                                   on_message=lambda text, level: log.info("%s", text))
            self.service.load_model()
            for root in self.roots:
                name = self.names[root]
                settings = self.settings
                if settings.index_dir and self.multi:
                    # One --index-dir for several roots: a subfolder each (one index per root).
                    settings = dataclasses.replace(
                        settings, index_dir=str(Path(settings.index_dir) / name))
                folder = self.service.add(root, settings, name=name)
                if folder is None:
                    raise ToolInputError(f"{root} is not a folder")
                self.folders.append(folder)
        except Exception as exc:
            log.exception("mdsearch could not start")
            self.start_error = str(exc)
            return
        finally:
            self._started.set()
        for folder in self.folders:
            self.service.index(folder)
        counter().load()

    def wait_started(self) -> None:
        if not self._started.wait(START_WAIT_S):
            raise ToolInputError("mdsearch is still starting (loading the search engine); "
                                 "try again in a few seconds")
        if self.start_error:
            raise ToolInputError(f"mdsearch could not start: {self.start_error}")

    # ---- paths ------------------------------------------------------------------------------

    @property
    def multi(self) -> bool:
        return len(self.roots) > 1

    def display(self, folder: Any, rel: str) -> str:
        """The path a caller sees (and gives back)."""
        return f"{folder.name}/{rel}" if self.multi else rel

    def locate(self, path: Any) -> Located:
        """Resolve a caller's path to one folder and a relative path inside it, or refuse it.

        Accepted: the paths results show, a path relative to a root, and an absolute path inside
        a root. Nothing outside the roots is ever resolved (``..`` is normalised first)."""
        self.wait_started()
        if not isinstance(path, str) or not path.strip():
            raise ToolInputError("'path' must be the path of a note, as search results show it")
        if "\x00" in path:  # an OS would cut the path there: refused, never shortened
            raise ToolInputError("'path' holds a NUL character; give the path of a note as "
                                 "search results show it")
        if len(path) > MAX_PATH_CHARS:
            raise ToolInputError(f"'path' is {len(path):,} characters long, longer than any "
                                 f"note's path can be ({MAX_PATH_CHARS:,})")
        raw = path.strip()
        if raw.startswith("file://"):
            raw = unquote(urlparse(raw).path)
        outside = ToolInputError(f"{path} is outside the folders this server reads ("
                                 + ", ".join(self.names[r] if self.remote else str(r)
                                             for r in self.roots) + ")")
        if os.path.isabs(raw) or raw.startswith("~"):
            found = self.service.locate(Path(raw).expanduser())
            if found is None:
                raise outside
            return Located(*found)
        first, _, rest = raw.replace("\\", "/").lstrip("./").partition("/")
        named = [(f, rest) for f in self.folders if rest and f.name == first]
        plain = [(f, raw) for f in self.folders]
        # With several roots "notes-2/x.md" is x.md of the folder named notes-2, before anything
        # else; with one root named vault, "vault/x.md" is tried after the path as given.
        tries = named + plain if self.multi else plain + named
        candidates = [Located(f, rel) for f, p in tries if (rel := f.note_path(p))]
        if not candidates:
            raise outside
        # Of several readings, one that names a file that exists wins.
        return next((c for c in candidates if (c.folder.root / c.rel).exists()), candidates[0])

    # ---- reading ----------------------------------------------------------------------------

    def read(self, path: Any) -> tuple[Located, str]:
        """A note's text (any of the accepted path forms); the engine's ``RequestError`` for
        what ``read_note`` refuses."""
        loc = self.locate(path)
        rel, text = loc.folder.read_note(loc.rel)
        return Located(loc.folder, rel), text

    def notes(self) -> list[tuple[Any, str]]:
        """Every indexed note, by folder (none before the start made the folders)."""
        return [(f, rel) for f in self.folders for rel in f.notes()]

    # ---- searching --------------------------------------------------------------------------

    def search(
        self,
        query: Any,
        *,
        limit: Any,
        mode: Any,
        filters: dict[str, Any],
        default_limit: int,
    ) -> tuple[list[tuple[Any, Any]], list[str], str]:
        """The ``(folder, hit)`` pairs of all folders as the engine merges them, notes for the
        caller, and the mode that was used. Raises RequestError (from the engine) for a bad
        request."""
        from mdsearch_ls.engine.api import SearchRequest

        asked = time.monotonic()
        request = SearchRequest.build(query, k=limit, mode=mode, filters=filters or None,
                                      default_k=default_limit)
        if request.empty:
            raise ToolInputError("the query has no words to search for (filters alone do not "
                                 "rank anything): add some text")
        self.wait_started()
        self.service.wait_open(OPEN_WAIT_S)
        notes = list(request.notes)
        used = request.mode or self.settings.mode
        if used != "keyword" and not self.service.wait_model(
                max(0.0, asked + MODEL_WAIT_S - time.monotonic())):
            error = self.service.model_error
            why = (f"the embedding model could not be loaded ({error})" if error
                   else "the embedding model is still loading")
            notes.append(f"{why}: these are keyword matches only; ask again for ranking by "
                         f"meaning")
            used = "keyword"

        def per_folder(folder: Any) -> Any:
            own = dict(filters)
            if self.multi and own.get("path"):
                routed = self._route_paths(folder, own.pop("path"))
                if routed is None:
                    return None  # the path filter names other folders only
                if routed:
                    own["path"] = routed  # (none: "name/", all of this folder)
            return SearchRequest.build(query, k=request.k, mode=used, filters=own or None,
                                       min_score=request.min_score)

        return self.service.search(request, self.folders, per_folder=per_folder), notes, used

    def _route_paths(self, folder: Any, values: Any) -> list[str] | None:
        """The ``path`` filter values meant for this folder: ``name/sub/`` is this folder's
        ``sub/`` and ``name/`` all of it ([]); a value naming no folder applies to every folder.
        None: the values name other folders only."""
        names = {f.name for f in self.folders}
        mine: list[str] = []
        for value in [values] if isinstance(values, str) else values:
            head, _, rest = str(value).partition("/")
            if head not in names:
                mine.append(value)
            elif head == folder.name:
                if not rest:
                    return []
                mine.append(rest)
        return mine or None

    def related(self, loc: Located, text: str, line: int, limit: Any, min_score: float) -> Any:
        """Sections of other notes like the section at ``line`` (0-based) of a note read by
        :meth:`read`, from the note's own folder."""
        from mdsearch_ls.engine.api import RelatedRequest

        request = RelatedRequest.build(loc.rel, line, text=text, k=limit, min_score=min_score)
        self.service.wait_open(OPEN_WAIT_S)
        if not self.service.wait_model(MODEL_WAIT_S):
            error = self.service.model_error
            raise ToolInputError(f"the embedding model could not be loaded: {error}" if error
                                 else "the embedding model is still loading; related sections "
                                      "need it. Try again in a few seconds")
        return loc.folder.related(request)

    # ---- updating ---------------------------------------------------------------------------

    def update(self, paths: list[str], timeout: float = 30.0) -> list[dict[str, str]]:
        """Reindex these notes now (a deleted one is dropped) by the engine's one rule for a
        change on disk; one status per path given."""
        from mdsearch_ls.engine.api import is_note_name

        self.wait_started()
        self.service.wait_open(OPEN_WAIT_S)
        out: list[dict[str, str]] = []
        queued: list[tuple[dict[str, str], Located, bool]] = []
        touched: dict[Path, Any] = {}  # the folders whose writes to wait for, by root
        for given in paths:
            try:
                loc = self.locate(given)
            except ToolInputError as exc:
                out.append({"path": str(given), "status": f"refused: {exc}"})
                continue
            full = loc.folder.root / loc.rel
            entry = {"path": self.display(loc.folder, loc.rel) or given, "status": "queued"}
            out.append(entry)
            if not full.is_dir() and not is_note_name(loc.rel, loc.folder.settings.include_formats):
                entry["status"] = "refused: not a markdown note (.md, .markdown)"
            elif not loc.folder.held:
                entry["status"] = ("not indexed here: another mdsearch process (an editor) "
                                   "holds this index and indexes the change itself")
            elif full.is_dir():
                entry["status"] = f"folder: {self.service.changed(full, True)} notes queued"
                touched[loc.folder.root] = loc.folder
            else:
                self.service.changed(full, full.is_file())
                queued.append((entry, loc, full.is_file()))
                touched[loc.folder.root] = loc.folder
        # One wait per folder touched: done once the changes queued above are written.
        deadline = time.monotonic() + timeout
        settled = {root: self.service.settled([folder], max(0.0, deadline - time.monotonic()))
                   for root, folder in touched.items()}
        for entry, loc, exists in queued:
            if not settled[loc.folder.root]:
                entry["status"] = "queued: the index is busy (first index); it is included"
            elif not exists:
                entry["status"] = "removed (the file no longer exists)"
            elif loc.folder.is_indexed(loc.rel):
                entry["status"] = "indexed"
            else:
                entry["status"] = ("not indexed: excluded by the settings or .gitignore, "
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
        return self.service.index_state()

    def status(self) -> dict[str, Any]:
        shown = ("name", "state", "index", "files", "chunks", "read_only", "held_by", "queue",
                 "last_update", "last_error")
        if not self.remote:  # a remote caller sees no path of this machine
            shown = (*shown, "root", "index_dir")
        folders = []
        for folder in self.folders:
            st = folder.status()
            entry = {key: st.get(key) for key in shown}
            if entry["last_error"]:
                entry["last_error"] = self.scrub(entry["last_error"])
            folders.append(entry)
        service = self.service
        return {
            "index": self.index_state(),
            "folders": folders,
            "model": {"name": service.embedder.name if service else None,
                      "state": "loading" if service is None or service.model_state in (
                          "not-loaded", "loading") else service.model_state,
                      "error": service.model_error if service else None},
            "watching": bool(service and service.watching),
            "changes_seen": service.changes_seen if service else 0,
            "last_change": _iso(service.last_change) if service and service.last_change
            else None,
            "token_estimate": counter().name,
            "start_error": self.scrub(self.start_error) if self.start_error else None,
        }

    def scrub(self, text: str) -> str:
        """``text`` with this machine's folder paths replaced by folder names, for a remote
        caller (an error message may quote a path it was given by the OS)."""
        if not self.remote:
            return text
        for root in sorted(self.roots, key=lambda r: -len(str(r))):
            text = text.replace(str(root), self.names[root])
        return text

    def folder_errors(self) -> list[str]:
        """Why each folder that failed cannot be searched, for a person to act on."""
        return [f"{f.name}: {self.scrub(f.last_error)}" for f in self.folders
                if f.state == "error" and not f.opened and f.last_error]

    def close(self, timeout: float = 3.0) -> bool:
        """Stop watching and close every index; False when a writer did not stop within
        ``timeout`` (the indexes are then abandoned: the next open repairs any half-write)."""
        return self.service is None or self.service.close(timeout)


def _names(roots: list[Path]) -> dict[Path, str]:
    names: dict[Path, str] = {}
    for root in roots:
        base = root.name or "root"
        name, n = base, 2
        while name in names.values():
            name, n = f"{base}-{n}", n + 1
        names[root] = name
    return names


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(ts))
