"""Learning what changed on disk in the folders this process holds: ``watchfiles`` on every
system (inotify on Linux, FSEvents on macOS, ReadDirectoryChangesW on Windows, polling where
none works, or where ``WATCHFILES_FORCE_POLLING`` asks for it).

A holder opens an index with a full look at the notes (a note edited while nothing ran is found
there); from then on, this tells it which notes changed, and the folder's writer queue coalesces
them per file, so a burst of saves (a ``git checkout``, a sync) costs one update per note. The
one rule for what an event means is :meth:`Folders.changed` (the disk decides, not the event's
kind).

Only the folders a note can be in are watched, each alone (not recursively): the notes' folders
as the index's own rules find them, never a dot-folder, ``node_modules`` or an excluded folder,
and never through a symbolic link (a link to ``/`` inside a vault once cost 2,884 inotify
watches). A folder created later is added when its creation is seen.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (folders imports this module)
    import watchfiles

    from mdsearch_ls.engine.service.folders import Folders

log = logging.getLogger(__name__)

STEP_MS = 30
"""A batch is handed over once the disk has been quiet this long (an editor's save is a few
events within a millisecond or two)..."""
DEBOUNCE_MS = 800
"""... or this long after its first event, whatever keeps coming (a long sync)."""
READY_MS = 1000
"""``watchfiles`` says nothing when its watch is in place; its first quiet spell of this long
does (``watching`` is true from then on), and it wakes the thread this often, a few
microseconds of Python each time."""


class Watcher:
    """One thread watching the folders this process holds."""

    def __init__(self, folders: Folders) -> None:
        self.folders = folders
        self._roots: set[Path] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._restart = threading.Event()
        self._thread: threading.Thread | None = None
        self._watched: set[str] = set()

    def watch(self, root: Path) -> None:
        """Watch ``root`` too (a folder this process now holds)."""
        with self._lock:
            self._roots.add(Path(root))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="mdsearch-watch",
                                                daemon=True)
                self._thread.start()
        self._restart.set()

    def forget(self, root: Path) -> None:
        with self._lock:
            self._roots.discard(Path(root))
        self._restart.set()

    def stop(self) -> None:
        self._stop.set()
        self._restart.set()

    @property
    def watching(self) -> bool:
        """Whether changes on disk in some folder are being watched (its watch in place)."""
        return bool(self._watched) and self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        # Imported here, in the watching thread, not at the top: watchfiles and anyio cost ~10 ms
        # of CPU at import, which a CLI search (its Folders never watch) does not need.
        import watchfiles

        created: list[Path] = []  # folders made since the last watch began: looked at again
        while not self._stop.is_set():
            self._restart.clear()
            with self._lock:
                roots = sorted(self._roots)
            folders = self._folders_to_watch(roots)
            self._watched = set()
            if not folders:
                self._restart.wait()
                continue
            try:
                for batch in watchfiles.watch(
                        *folders, stop_event=_Either(self._stop, self._restart),
                        watch_filter=None, recursive=False, step=STEP_MS,
                        debounce=DEBOUNCE_MS, raise_interrupt=False,
                        ignore_permission_denied=True, rust_timeout=READY_MS,
                        yield_on_timeout=True):
                    if not batch:  # quiet for READY_MS: the watch is in place
                        if not self._watched:
                            self._watched = set(folders)
                            self._look_again(created)
                            created = []
                        continue
                    if self._handle(batch, created):
                        break  # a folder was created or removed: watch the new set
            except Exception as exc:  # a folder gone while being added, a watch limit
                log.warning("watching %s for changes failed (%s); watching again",
                            ", ".join(map(str, roots)), exc)
                if self._stop.wait(1.0):
                    return

    def _look_again(self, created: list[Path]) -> None:
        """Notes written in a folder between its creation and its watch (``mkdir -p a/b``
        then a save, a sync) have no event of their own: the folder is queued once more."""
        if created:
            self._queue([(p, p.exists()) for p in created])

    def _queue(self, events: list[tuple[Path, bool]]) -> None:
        try:
            self.folders.changed_all(events)
        except Exception:
            log.exception("could not queue changed notes")

    def _folders_to_watch(self, roots: list[Path]) -> list[str]:
        """Each root and every real folder below it that the index's rules would look in."""
        out: list[str] = []
        for root in roots:
            folder = self.folders.get(root)
            if folder is None:
                continue
            stack = [(str(root), "")]
            while stack:
                path, rel = stack.pop()
                out.append(path)
                try:
                    with os.scandir(path) as entries:
                        for e in entries:
                            sub = f"{rel}/{e.name}" if rel else e.name
                            if e.is_dir(follow_symlinks=False) and not folder.dir_rejected(sub):
                                stack.append((e.path, sub))
                except OSError:
                    continue
        return out

    def _handle(self, batch: set[tuple[watchfiles.Change, str]], created: list[Path]) -> bool:
        """Queue what a batch changed; True when a folder came or went (watch anew), the
        folders that came added to ``created``."""
        paths = sorted({Path(p) for _change, p in batch})
        events = [(p, p.exists()) for p in paths]
        created.extend(p for p, exists in events if exists and p.is_dir())
        log.debug("changes on disk: %s", ", ".join(str(p) for p, _ in events))
        self._queue(events)
        return any((exists and p.is_dir()) or (not exists and str(p) in self._watched)
                   for p, exists in events)


class _Either:
    """Set when either event is (``watchfiles`` takes one stop event)."""

    def __init__(self, *events: threading.Event) -> None:
        self._events = events

    def is_set(self) -> bool:
        return any(e.is_set() for e in self._events)


__all__ = ["Watcher"]
