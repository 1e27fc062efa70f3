"""Is an index up to date with its notes? Answered from a scan of file stats and the manifest.

A CLI search wants a fresh index, but updating one means opening it for writing: the writer lock,
and Chroma (importing it alone costs seconds). Most searches find nothing changed, so the CLI asks
here first, from a read-only open (SQLite only), and opens for writing only when something did
change. The rule is the indexer's own (a note is changed when its change stamp or size differs
from the manifest's; a file skipped before in the same state stays skipped), so the two cannot
disagree about whether there is work to do.
"""

from __future__ import annotations

import marshal
import os
import signal
import stat
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from mdsearch_ls.engine.notes import files as sources

if TYPE_CHECKING:
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.index.manifest import Manifest

TARGETED_MAX = 200
"""Changed notes a search brings in one by one (no second scan of the folder, no read of every
note's record: a one-note update at 96k notes); more go through a full, cancellable index."""


class Seen(Protocol):
    """``{rel: (change stamp, size)}`` of the notes a walk found, as a look reads it."""

    def items(self) -> Iterable[tuple[str, tuple[float, int]]]: ...
    def __contains__(self, rel: object) -> bool: ...
    def __len__(self) -> int: ...


def changed_notes(root: Path, settings: Settings, manifest: Manifest, index_dir: Path | None,
                  *, among: Iterable[str] | None = None, watch: sources.WalkWatch | None = None,
                  seen: Callable[[], Seen] | None = None) -> list[str] | None:
    """The notes an update would read or drop, by root-relative path (empty: the index is up
    to date); None when only a full update will do (a keyword index of an older format, which
    only a write open converts). A writer given this list updates these notes alone, without a
    second scan of the folder or a read of every note's record. ``among``: look at these notes
    only (a watch of the folders named them), by the same rule; ``watch``: see ``stat_scan``;
    ``seen``: the walk's answer made elsewhere (:class:`WalkBeside`), asked once the manifest
    is read."""
    if manifest.keywords_outdated():
        return None
    if among is not None:
        return _changed_among(root, settings, manifest, index_dir, among)
    known = manifest.file_stats()
    skipped = manifest.skipped()
    found: Seen = seen() if seen is not None else _stats(root, settings, index_dir, watch)
    # (an unchanged note, nearly every one, is a lookup and a compare: the rule's call per
    # note cost 70 ms of a 96k-note look)
    odd = [(rel, st) for rel, st in found.items() if known.get(rel) != st]
    changed = [rel for rel, st in odd if _differs(st, known.get(rel), skipped.get(rel))]
    # Every indexed note found, counted (a set of 89k paths to ask cost 25 ms): none is gone.
    found_known = len(found) - len(odd) + sum(1 for rel, _ in odd if rel in known)
    if found_known == len(known):
        return changed
    # (a note grown past the size limit is not in `found`: an update drops it, as below)
    return changed + sorted(rel for rel in known if rel not in found)


def _stats(root: Path, settings: Settings, index_dir: Path | None,
           watch: sources.WalkWatch | None = None) -> dict[str, tuple[float, int]]:
    return sources.stat_scan(root, include=settings.include, exclude=settings.exclude,
                             index_dir=index_dir, max_file_bytes=settings.max_file_bytes,
                             formats=settings.include_formats, watch=watch)[0]


def _differs(seen: tuple[float, int] | None, indexed: tuple[float, int] | None,
             skipped_as: tuple[float, int] | None) -> bool:
    """The indexer's rule: a note is changed when its ``(change stamp, size)`` is not the
    manifest's (gone, or new), and a file skipped before in the same state stays skipped."""
    if seen is None:
        return indexed is not None
    return skipped_as != seen if indexed is None else indexed != seen


def _changed_among(root: Path, settings: Settings, manifest: Manifest, index_dir: Path | None,
                   among: Iterable[str]) -> list[str]:
    """:func:`changed_notes` for a few named notes: a stat of each, not a walk."""
    flt = sources.SourceFilter(root, include=settings.include, exclude=settings.exclude,
                               index_dir=index_dir, formats=settings.include_formats)
    rels = sorted(set(among))
    known = {rel: (r.ctime, r.size) for rel, r in manifest.files_of(rels).items()}
    skipped = manifest.skipped()
    changed = []
    for rel in rels:
        seen = None
        if flt.accepts(rel):
            try:
                st = os.stat(os.path.join(flt.root, rel))
            except OSError:  # gone: an update drops it
                st = None
            if (st is not None and stat.S_ISREG(st.st_mode) and not sources._oversize(
                    rel, st.st_size, settings.max_file_bytes, settings.include_formats)):
                seen = (sources.change_stamp(st), st.st_size)
        if _differs(seen, known.get(rel), skipped.get(rel)):
            changed.append(rel)
    return changed


class WalkBeside:
    """The walk of a freshness look (every note's stat), run in a process forked beside the
    caller while the caller gets on with what it needs whatever the answer: the model.

    With nothing holding the index, a CLI search of 89k notes spent 0.55 s of its 0.9 s on one
    core stat-ing every note and reading the manifest, while the second core idled and the
    model's load waited behind them. A thread cannot take the walk (walking beside the load
    finished no sooner: the two contend for the GIL), a child process can. The child does
    nothing but the walk: it opens no database (SQLite's state does not survive a fork) and
    sends back three flat arrays, which cost the caller a fraction of what a pickled dict
    would. No ``fork`` on this system (or none allowed now), threads already running, or a
    child that gave no answer (a signal) leave the walk to :meth:`seen`, in process: the
    answer never differs, only its cost.
    """

    def __init__(self, root: Path, settings: Settings, index_dir: Path | None) -> None:
        self._args = (root, settings, index_dir)
        self.pid: int | None = None
        """The child's, until its answer is read; None when the walk is left to this process."""
        self._fd = -1
        if not hasattr(os, "fork") or _threads() > 1:
            return
        read_fd, write_fd = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # (a limit on processes, a sandbox that forbids them)
            os.close(read_fd)
            os.close(write_fd)
            return
        if pid == 0:  # the child, which never returns into the caller's code
            try:
                os.close(read_fd)
                _walk_and_send(write_fd, *self._args)
            finally:
                os._exit(0)
        os.close(write_fd)
        self.pid, self._fd = pid, read_fd

    def walking(self) -> bool:
        """Whether the child is still at it (it writes its answer in one go at the end): what
        the caller does ahead is free only until then."""
        if self.pid is None:
            return False
        import select

        return not select.select([self._fd], [], [], 0)[0]

    def seen(self) -> Seen:
        """What the walk found: the child's answer, or a walk made here when it gave none."""
        if self.pid is not None:
            data = bytearray()
            try:
                while chunk := os.read(self._fd, 1 << 20):
                    data += chunk
            finally:
                self.cancel()
            try:
                return _Arrays(*marshal.loads(data))
            except (EOFError, ValueError, TypeError, AttributeError):  # the child failed
                pass
        return _stats(*self._args)

    def cancel(self) -> None:
        """Stop the child if it still runs, and reap it; a no-op once :meth:`seen` answered."""
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        os.close(self._fd)
        try:
            if os.waitpid(pid, os.WNOHANG) == (0, 0):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        except (ChildProcessError, ProcessLookupError):
            pass


def _threads() -> int:
    """The threads of this process, the runtime's too (a model's pool, a BLAS): a fork while
    another runs could copy a lock it held into a child that then waits on it for ever."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # no /proc (macOS): the threads Python started
        return threading.active_count()


class _Arrays:
    """A walk's answer as the child sent it: paths, mtimes and sizes side by side."""

    def __init__(self, rels: bytes, mtimes: bytes, sizes: bytes) -> None:
        self.rels = rels.decode("utf-8", "surrogateescape").split("\0") if rels else []
        self.mtimes, self.sizes = array("d"), array("q")
        self.mtimes.frombytes(mtimes)
        self.sizes.frombytes(sizes)
        if not len(self.rels) == len(self.mtimes) == len(self.sizes):
            raise ValueError("a walk's answer cut short")
        self._set: set[str] | None = None

    def items(self) -> Iterator[tuple[str, tuple[float, int]]]:
        return zip(self.rels, zip(self.mtimes, self.sizes, strict=True), strict=True)

    def __len__(self) -> int:
        return len(self.rels)

    def __contains__(self, rel: object) -> bool:
        if self._set is None:
            self._set = set(self.rels)
        return rel in self._set


def _walk_and_send(fd: int, root: Path, settings: Settings, index_dir: Path | None) -> None:
    """The child's side of :class:`WalkBeside`; nothing is sent when the walk fails (the caller
    then walks again, in process, where a failure is raised as it would be without a child)."""
    found = _stats(root, settings, index_dir)
    view = memoryview(marshal.dumps((
        "\0".join(found).encode("utf-8", "surrogateescape"),
        array("d", (st[0] for st in found.values())).tobytes(),
        array("q", (st[1] for st in found.values())).tobytes())))
    while view:
        view = view[os.write(fd, view):]
