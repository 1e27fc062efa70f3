"""Keeping the index fresh without being asked: watch the roots, queue what changed.

An MCP client, unlike an editor, tells the server nothing about files, so the server watches its
roots itself (``watchfiles``: inotify, FSEvents or ReadDirectoryChangesW, polling where none
works). Events are batched by watchfiles (a batch is yielded once the disk has been quiet for
50 ms, at most 1.6 s after its first event) and coalesced again per file by each folder's writer
queue, so a burst of saves (a ``git checkout``, a sync) costs one update per note.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mdsearch_ls.mcp.roots import Library

log = logging.getLogger(__name__)

# Folders whose changes are never notes (the engine ignores them too); skipped before anything
# else so a busy .git/ or an editor's workspace file costs nothing.
_SKIP_PARTS = frozenset({".git", ".obsidian", ".trash", "node_modules", "__pycache__"})


def _interesting(path: str, roots: list[Path]) -> bool:
    p = Path(path)
    for root in roots:
        if p == root or root in p.parents:
            return not any(part in _SKIP_PARTS for part in p.relative_to(root).parts)
    return False


class Watcher:
    """One thread watching every root of a :class:`Library`."""

    def __init__(self, library: Library) -> None:
        self.library = library
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.alive = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mdsearch-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        try:
            import watchfiles
        except ImportError:  # pragma: no cover - a dependency
            log.warning("watchfiles is not installed: notes changed on disk are indexed only "
                        "by update_files or at the next start")
            return
        bases = self.library.watched_roots()
        roots = [str(r) for r in bases]
        if not roots:
            return
        for polling in (False, True):
            try:
                self.alive = True
                for batch in watchfiles.watch(
                    *roots,
                    watch_filter=lambda change, path: _interesting(path, bases),
                    stop_event=self._stop,
                    force_polling=polling or None,
                    debounce=1600,
                    step=50,
                    raise_interrupt=False,
                    ignore_permission_denied=True,
                ):
                    self._handle(batch)
                return
            except Exception as exc:
                self.alive = False
                if self._stop.is_set():
                    return
                if polling:
                    log.warning("cannot watch %s for changes: %s", ", ".join(roots), exc)
                    return
                log.warning("file watching failed (%s); polling for changes instead", exc)
            finally:
                self.alive = False

    def _handle(self, batch: Any) -> None:
        paths = {Path(p) for _change, p in batch}
        events = [(p, p.exists()) for p in sorted(paths)]
        log.debug("changes on disk: %s", ", ".join(str(p) for p, _ in events))
        try:
            self.library.changed(events)
        except Exception:
            log.exception("could not queue changed notes")
