"""Which files under a notes root are notes we index, and how their bytes become text.

The full scan and single-file updates (a save, a file-watcher event) must agree on what counts
as a note, otherwise a file could be indexed by one path and deleted by the other. Both
therefore go through one :class:`SourceFilter`.

Nothing here ever writes to the notes root: it is the user's data, and the index is only a
cache that can always be rebuilt from it.
"""

from __future__ import annotations

import fnmatch
import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Protocol

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.locations import change_stamp
from mdsearch_ls.engine.notes.decoding import _oversize_warning
from mdsearch_ls.engine.notes.formats import format_of, oversize

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

__all__ = [
    "DEFAULT_EXCLUDES", "HIDDEN_DIRS", "MARKDOWN_SUFFIXES", "SkipFn", "SourceFile",
    "SourceFilter", "count_notes", "is_note_name", "relpath", "scan", "stat_scan",
]

log = logging.getLogger(__name__)

DEFAULT_EXCLUDES: tuple[str, ...] = (".git/", "node_modules/", ".obsidian/", ".trash/")
# Dot-folders (.venv/, .cache/, .config/ ...) hold tools' files, not a person's notes: left out
# by default like the excludes above, except that an include glob naming one (``.notes/**``) or
# an exclude negation (``!.notes/``) brings it back. The DEFAULT_EXCLUDES stay out regardless.
HIDDEN_DIRS = ".*/"
MARKDOWN_SUFFIXES = (".md", ".markdown")

GITIGNORE = ".gitignore"


@dataclass(frozen=True)
class SourceFile:
    """A note found on disk; ``rel`` is its identity everywhere else in the engine."""

    where: str | Path
    """Absolute path under the root as the user sees it (symlinks inside it kept; see path)."""
    rel: str
    """Relative to the root with POSIX separators, so ids are stable across platforms."""
    size: int
    """Size in bytes at scan time (of the link target for a symlinked file)."""
    mtime: float  # st_mtime: what the modified: filter reads
    ctime: float = 0.0  # (locations.change_stamp): a hint of a change, before hashing

    @property
    def path(self) -> Path:
        """(made on use: a ``Path`` per file cost a no-op index of 89k notes 1.2 s)"""
        return Path(self.where)


def _is_markdown(rel: str, formats: Sequence[str] = ()) -> bool:
    # Case-insensitive because README.MD and Notes.Markdown are common on
    # case-insensitive filesystems and users expect them found.
    lower = rel.lower()
    return lower.endswith(MARKDOWN_SUFFIXES) or (
        bool(formats) and format_of(lower, formats) is not None)


def is_note_name(rel: str, formats: Sequence[str] = ()) -> bool:
    return _is_markdown(rel, formats)  # markdown, or a format ``formats`` names


def _oversize(rel: str, size: int, max_file_bytes: int, formats: Sequence[str]) -> str | None:
    """The warning for a file over its limit (a document's is larger: formats.RAW_FACTOR)."""
    fmt = format_of(rel, formats)
    if fmt is not None:
        return oversize(rel, size, fmt, max_file_bytes)
    return _oversize_warning(rel, size, max_file_bytes) if size > max_file_bytes else None


def _is_within(path: str, real_root: str) -> bool:
    return path == real_root or path.startswith(real_root.rstrip(os.sep) + os.sep)


def _realpath(path: str | os.PathLike[str]) -> str | None:
    try:
        return os.path.realpath(path)
    except (OSError, RuntimeError, ValueError):
        return None


def _clean_rel(rel: str) -> str | None:
    """Normalise a caller-supplied relative path, or ``None`` when it is not one. Front ends
    build ``rel`` from editor URIs and watcher events, so be strict: anything absolute or
    climbing out with ``..`` is never a note under this root."""
    rel = rel.replace("\\", "/").rstrip("/") if rel else ""
    if not rel or rel.startswith("/") or (len(rel) > 1 and rel[1] == ":"):
        return None
    parts = PurePosixPath(rel).parts
    if any(p in ("..", "") for p in parts) or PurePosixPath(rel).is_absolute():
        return None
    return "/".join(p for p in parts if p != ".") or None


def relpath(root: Path, path: Path) -> str | None:
    """POSIX path of ``path`` relative to ``root``, or ``None`` when it lies outside. The path
    as given first (a symlink inside the root keeps the name the user sees), then resolved
    (editors hand over canonical paths while the root was configured through a symlink)."""
    root_abs = Path(os.path.normpath(Path(root).expanduser().absolute()))
    path_abs = Path(os.path.normpath(Path(path).expanduser().absolute()))
    try:
        rel = path_abs.relative_to(root_abs)
    except ValueError:
        real_root, real_path = _realpath(root_abs), _realpath(path_abs)
        if real_root is None or real_path is None:
            return None
        try:
            rel = Path(real_path).relative_to(real_root)
        except ValueError:
            return None
    posix = rel.as_posix()
    return "" if posix == "." else posix


class SourceFilter:
    """Decides whether a relative path is a note we index.

    Shared by the full scan and by single-file updates (a save or a file-watcher
    event) so both agree. Rules, in git's spirit:

    * only ``.md`` / ``.markdown`` files (any case), and the documents of the formats
      ``formats`` (the setting ``include_formats``) names;
    * never inside the default excludes, the user's excludes or the index directory;
    * never ignored by a ``.gitignore`` of the root or of any directory above the file
      (deeper files take precedence, and a file inside an ignored directory cannot be
      re-included, as in git);
    * when ``include`` is non-empty, only files matching one of its patterns;
    * never a path whose real location (after symlinks) leaves the root.

    ``.gitignore`` files are read lazily and cached; call :meth:`refresh` after one
    changes so the next decision sees it.
    """

    def __init__(
        self,
        root: Path,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        index_dir: Path | None = None,
        formats: Sequence[str] = (),
    ) -> None:
        self.root = Path(os.path.normpath(Path(root).expanduser().absolute()))
        self.formats = tuple(formats)
        self._real_root = _realpath(self.root) or str(self.root)
        # Imported here, not at the top: pathspec costs ~30 ms of CPU at import (its pattern
        # backends), a sixth of a CLI search that a holder answers, which never walks notes.
        from pathspec import GitIgnoreSpec

        self._include = GitIgnoreSpec.from_lines(include) if include else None
        self._exclude = GitIgnoreSpec.from_lines([*DEFAULT_EXCLUDES, *exclude])
        self._hidden = GitIgnoreSpec.from_lines([HIDDEN_DIRS, *exclude])
        self._named_dot_dirs = tuple(
            seg for pattern in include for seg in pattern.strip().lstrip("!").split("/")
            if seg.startswith(".") and seg not in (".", "..")
        )
        self._index_rels = self._index_rels_for(index_dir)
        self._gitignores: dict[str, GitIgnoreSpec | None] = {}
        self._dir_cache: dict[str, bool] = {}
        # Without include or exclude patterns of the user's, a markdown file is a note when its
        # folder is and no .gitignore governs it: a folder's answer is reused for each of its
        # files (per-file glob and .gitignore matching was half the cost of a scan).
        self._per_file_rules = bool(include or exclude)
        self._plain_dirs: dict[str, bool] = {}

    def _index_rels_for(self, index_dir: Path | None) -> tuple[str, ...]:
        # Both the lexical and the resolved location, since either may be how the
        # walk reaches it (the root or the index dir may be given through a symlink).
        if index_dir is None:
            return ()
        rels: set[str] = set()
        lexical = relpath(self.root, Path(index_dir))
        if lexical:
            rels.add(lexical)
        real_idx = _realpath(Path(index_dir).expanduser().absolute())
        if real_idx and _is_within(real_idx, self._real_root) and real_idx != self._real_root:
            rels.add(Path(real_idx).relative_to(self._real_root).as_posix())
        return tuple(sorted(rels))

    def refresh(self) -> None:
        """Forget cached ``.gitignore`` files, e.g. after the watcher saw one change."""
        self._gitignores.clear()
        self._dir_cache.clear()
        self._plain_dirs.clear()

    # -- gitignore -------------------------------------------------------------

    def _gitignore(self, dir_rel: str) -> GitIgnoreSpec | None:
        if dir_rel in self._gitignores:
            return self._gitignores[dir_rel]
        spec = None
        path = self.root / dir_rel / GITIGNORE if dir_rel else self.root / GITIGNORE
        try:
            raw = path.read_bytes()
        except OSError:
            raw = None
        if raw is not None:
            lines = raw.decode("utf-8", errors="replace").splitlines()
            spec = type(self._exclude).from_lines(lines)
        self._gitignores[dir_rel] = spec
        return spec

    def _git_ignored(self, rel: str, is_dir: bool) -> bool:
        """Whether the ``.gitignore`` files above ``rel`` ignore it (deepest decides)."""
        parts = rel.split("/")
        # Directories that may hold a .gitignore governing rel: "", "a", "a/b", ...
        for depth in range(len(parts) - 1, -1, -1):
            spec = self._gitignore("/".join(parts[:depth]))
            if spec is None:
                continue
            sub = "/".join(parts[depth:]) + ("/" if is_dir else "")
            result = spec.check_file(sub).include
            if result is not None:
                return result
        return False

    # -- decisions -------------------------------------------------------------

    def _in_index_dir(self, rel: str) -> bool:
        return any(rel == ix or rel.startswith(ix + "/") for ix in self._index_rels)

    def dir_rejected(self, rel_dir: str) -> bool:
        """Whether nothing below ``rel_dir`` can be a note, so the scan can prune it."""
        cached = self._dir_cache.get(rel_dir)
        if cached is not None:
            return cached
        parent, _, _ = rel_dir.rpartition("/")
        rejected = (
            (bool(parent) and self.dir_rejected(parent))
            or self._in_index_dir(rel_dir)
            or self._exclude.match_file(rel_dir + "/")
            or self._hidden_dir(rel_dir)
            or self._git_ignored(rel_dir, is_dir=True)
        )
        self._dir_cache[rel_dir] = rejected
        return rejected

    def _hidden_dir(self, rel_dir: str) -> bool:
        name = rel_dir.rpartition("/")[2]
        if not name.startswith("."):
            return False
        if any(fnmatch.fnmatchcase(name, seg) for seg in self._named_dot_dirs):
            return False
        return self._hidden.match_file(rel_dir + "/")

    def _plain_dir(self, rel_dir: str) -> bool:
        """Whether every markdown file directly in ``rel_dir`` (not rejected) is a note: no
        pattern of the user's and no ``.gitignore`` of it or above can leave one out."""
        plain = self._plain_dirs.get(rel_dir)
        if plain is None:
            parts = rel_dir.split("/") if rel_dir else []
            plain = not self._per_file_rules and all(
                self._gitignore("/".join(parts[:depth])) is None
                for depth in range(len(parts) + 1))
            self._plain_dirs[rel_dir] = plain
        return plain

    def _accepts_lexically(self, rel: str) -> bool:
        if not _is_markdown(rel, self.formats):
            return False
        parent, _, _ = rel.rpartition("/")
        if parent and self.dir_rejected(parent):
            return False
        if self._plain_dir(parent):
            # the default excludes name folders only, so a folder not rejected keeps its files
            return rel not in self._index_rels
        if self._in_index_dir(rel) or self._exclude.match_file(rel):
            return False
        if self._git_ignored(rel, is_dir=False):
            return False
        return self._include is None or self._include.match_file(rel)

    def accepts(self, rel: str) -> bool:
        """Whether ``rel`` (relative to the root, POSIX) is a note we index.

        Works for files that no longer exist (a delete event), since only symlinks
        that do exist can lead outside the root.
        """
        clean = _clean_rel(rel)
        if clean is None or not self._accepts_lexically(clean):
            return False
        real = _realpath(self.root / clean)
        return real is not None and _is_within(real, self._real_root)


def _check_root(root: Path) -> Path:
    root = Path(root).expanduser()
    if not root.exists():
        raise FileNotFoundError(f"notes root does not exist: {root}")
    if not root.is_dir():
        raise NotADirectoryError(f"notes root is not a directory: {root}")
    return Path(os.path.normpath(root.absolute()))


SkipFn = Callable[[str, float, int, str], None]
"""``(rel, mtime, size, message)`` of a file (or ``"dir/"``) a scan leaves out."""


class WalkWatch(Protocol):
    """Told what a walk visits (index/notewatch.py): each folder before it is listed, so a
    change after that is the watch's to see, and each note reached through a symbolic link."""

    def directory(self, path: str, rel_dir: str) -> None: ...
    def linked_note(self, rel: str) -> None: ...


def _walk(
    root: Path,
    flt: SourceFilter,
    skip: SkipFn,
    keep_going: Callable[[], bool] | None = None,
    watch: WalkWatch | None = None,
) -> Iterable[tuple[str, str]]:
    """Yield ``(path, rel)`` of candidate notes, following symlinks only inside the root (the
    path a string: a ``Path`` per file cost as much as the file's ``stat``). Real directories
    already visited are skipped: no symlink loop, no folder linked twice indexed twice.
    ``keep_going`` is asked before each directory (a count with a time limit stops in trees
    without a single note)."""
    real_root = _realpath(root) or str(root)
    visited = {real_root}
    stack: list[tuple[str, str]] = [(str(root), "")]
    while stack:
        if keep_going is not None and not keep_going():
            return
        directory, rel_dir = stack.pop()
        if watch is not None:
            watch.directory(directory, rel_dir)
        try:
            with os.scandir(directory) as it:
                entries = list(it)  # (files in any order: every caller sorts or counts)
        except OSError as exc:
            try:
                st = os.stat(directory)
                mtime, size = st.st_mtime, st.st_size
            except OSError:
                mtime, size = -1.0, -1
            skip(f"{rel_dir}/" if rel_dir else "./", mtime, size,
                 f"skipped directory {rel_dir or '.'}: {exc.strerror or exc}")
            continue
        subdirs: list[tuple[str, str]] = []
        rest = []  # folders and links, in name order: the first name of a folder linked twice
        plain = flt._plain_dir(rel_dir)  # (this folder is not rejected: the walk is in it)
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if not plain or not entry.is_file(follow_symlinks=False):
                rest.append((entry.name, rel, entry))
            elif _is_markdown(rel, flt.formats) and rel not in flt._index_rels:
                yield entry.path, rel  # most entries: a plain file, decided here
        for _, rel, entry in sorted(rest, key=lambda r: r[0]):
            path = entry.path
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir()  # follows links
                is_file = entry.is_file()
            except OSError:
                continue
            real: str | None = None
            if is_link:
                real = _realpath(path)
                if real is None or not _is_within(real, real_root):
                    log.info("not following %s: symlink leads outside the root", rel)
                    continue
            if is_dir:
                if flt.dir_rejected(rel):
                    continue
                real = real or _realpath(path)
                if real is None or real in visited:
                    continue
                visited.add(real)
                subdirs.append((path, rel))
            elif is_file and flt._accepts_lexically(rel):
                if is_link and watch is not None:
                    watch.linked_note(rel)
                yield path, rel
        stack.extend(reversed(subdirs))


def scan(
    root: Path,
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    index_dir: Path | None = None,
    max_file_bytes: int = Settings.max_file_bytes,
    warn: Callable[[str], None] | None = None,
    skipped: SkipFn | None = None,
    formats: Sequence[str] = (),
) -> list[SourceFile]:
    """Every note under ``root``, sorted by ``rel`` so diffs against the manifest are stable.

    Oversize files are dropped here, from ``stat`` alone, so a stray multi-megabyte export
    never gets read; ``warn`` receives one message naming each skipped file (default: a log
    warning). With ``skipped``, skips go there instead, with the file's mtime and size, so a
    caller can remember them and warn once per change rather than on every scan (a directory
    that cannot be listed is reported as ``"dir/"``).
    """
    warn = warn or log.warning

    def skip(rel: str, mtime: float, size: int, message: str) -> None:
        if skipped is not None:
            skipped(rel, mtime, size, message)
        else:
            warn(message)

    root_abs = _check_root(root)
    flt = SourceFilter(root_abs, include=include, exclude=exclude, index_dir=index_dir,
                       formats=formats)
    found: list[SourceFile] = []
    for path, rel in _walk(root_abs, flt, skip):
        try:
            st = os.stat(path)
        except OSError as exc:  # vanished between listing and stat
            log.debug("skipped %s: %s", rel, exc)
            continue
        too_big = _oversize(rel, st.st_size, max_file_bytes, formats)
        if too_big:
            skip(rel, change_stamp(st), st.st_size, too_big)
            continue
        found.append(SourceFile(path, rel, st.st_size, st.st_mtime, change_stamp(st)))
    found.sort(key=lambda f: f.rel)
    return found


def stat_scan(
    root: Path,
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    index_dir: Path | None = None,
    max_file_bytes: int = Settings.max_file_bytes,
    formats: Sequence[str] = (),
    watch: WalkWatch | None = None,
) -> tuple[dict[str, tuple[float, int]], dict[str, tuple[float, int]]]:
    """``(notes, oversize)``: ``{rel: (change_stamp, size)}`` of what :func:`scan` would find and
    what it would skip for size, by the same walk and rules, without a record per file: all a
    freshness check compares with the manifest (a directory that cannot be listed is left out,
    as a scan reports it and indexes nothing of it). ``watch`` is told each folder it lists."""
    root_abs = _check_root(root)
    flt = SourceFilter(root_abs, include=include, exclude=exclude, index_dir=index_dir,
                       formats=formats)
    notes: dict[str, tuple[float, int]] = {}
    oversize: dict[str, tuple[float, int]] = {}
    stat = os.stat
    for path, rel in _walk(root_abs, flt, lambda *_skipped: None, watch=watch):
        try:
            st = stat(path)
        except OSError:  # vanished between listing and stat
            continue
        # every limit is at least max_file_bytes (a document's is a multiple of it)
        big = st.st_size > max_file_bytes and _oversize(rel, st.st_size, max_file_bytes,
                                                        formats)
        (oversize if big else notes)[rel] = (change_stamp(st), st.st_size)
    return notes, oversize


def count_notes(
    root: Path,
    *,
    include: Sequence[str] = (),
    exclude: Sequence[str] = (),
    index_dir: Path | None = None,
    stop_after: int | None = None,
    seconds: float | None = None,
    formats: Sequence[str] = (),
) -> tuple[int, bool]:
    """``(n, complete)``: how many notes :func:`scan` would find (size limits aside), without
    reading or stat-ing them. Counting stops past ``stop_after`` notes or after ``seconds``
    (``complete`` is then False), so asking "more than 20,000?" of a home folder or of ``/``
    costs a bounded walk, not a full one."""
    root_abs = _check_root(root)
    flt = SourceFilter(root_abs, include=include, exclude=exclude, index_dir=index_dir,
                       formats=formats)
    deadline = None if seconds is None else time.monotonic() + seconds
    timed_out = False

    def keep_going() -> bool:
        nonlocal timed_out
        timed_out = deadline is not None and time.monotonic() > deadline
        return not timed_out

    n = 0
    for _ in _walk(root_abs, flt, lambda *_skipped: None, keep_going):
        n += 1
        if stop_after is not None and n > stop_after:
            return n, False
    return n, not timed_out
