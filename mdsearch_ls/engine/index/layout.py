"""Where an index lives on disk, what its files are called, and who holds it.

Paths and names only, no stores: the CLI asks "is this folder indexed?" and "which folder does
this command mean?" before asking anything of an index, and the workspace takes the same
answers, the writer lock and the damage marker from here. Indexes live in the user's cache
folder (``platformdirs``), one folder per notes folder, named by the folder's name and a hash
of its absolute path, so a synced vault never carries its index and deleting one is always safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.embedding import space_model_name
from mdsearch_ls.engine.errors import BroadRootError, ForeignIndexError, IndexLockedError
from mdsearch_ls.engine.index.manifest_schema import SCHEMA_VERSION
from mdsearch_ls.engine.notes import files as sources

log = logging.getLogger(__name__)

APP = "mdsearch"


def cache_root() -> Path:
    """Base folder for indexes: ``$MDSEARCH_CACHE_DIR`` or the platform's user cache folder."""
    env = os.environ.get("MDSEARCH_CACHE_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_cache_dir(APP,
                                                                               appauthor=False))


def default_index_dir(root: Path | str) -> Path:
    """``<cache>/indexes/<folder name>-<hash of its path>``: readable and collision-free."""
    absolute = os.path.realpath(os.path.expanduser(root))
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.basename(absolute)).strip("-") or "root"
    digest = hashlib.sha1(absolute.encode()).hexdigest()[:12]
    return cache_root() / "indexes" / f"{name[:40]}-{digest}"


def find_index_root(start: Path | str, index_dir: Path | str | None = None) -> Path | None:
    """The notes folder a command run in ``start`` means: ``start`` or its nearest parent with
    an index in the default place, like git finds its repository. With ``index_dir`` (an index
    kept elsewhere), the folder it was built from (its ``ROOT`` file), whatever ``start`` is.
    Reads only: nothing is created."""
    if index_dir is not None:
        try:
            recorded = (Path(index_dir).expanduser() / "ROOT").read_text("utf-8").strip()
        except OSError:
            return None
        return Path(recorded) if recorded and Path(recorded).is_dir() else None
    here = Path(os.path.realpath(os.path.expanduser(start)))
    for folder in (here, *here.parents):
        if any(default_index_dir(folder).glob("*.sqlite3")):
            return folder
    return None


def count_notes(root: Path | str, settings: Settings, *, stop_after: int | None = None,
                seconds: float | None = None,
                index_dir: Path | str | None = None) -> tuple[int, bool]:
    """``(n, complete)``: how many notes indexing ``root`` with ``settings`` would take in,
    counting at most past ``stop_after`` notes or for ``seconds``, so a front end can ask before
    indexing a huge or surprising folder."""
    root = Path(root).expanduser()
    idx = index_dir_of(root, settings, index_dir)
    return sources.count_notes(root, include=settings.include, exclude=settings.exclude,
                               index_dir=idx, stop_after=stop_after, seconds=seconds,
                               formats=settings.include_formats)


def broad_root_reason(root: Path | str, settings: Settings,
                      max_files_name: str = "max_files") -> tuple[str, bool] | None:
    """Why a first index of ``root`` needs a person's yes, or None: ``/``, the home folder, or
    more than ``max_files`` notes. One rule for every front end (the CLI asks for ``--yes``, the
    servers refuse unless ``allow_any_root``): a server started on ``/`` once began walking
    346,929 files with an ETA of 4.4 days. Counted without reading a note, and bounded, so the
    question never costs longer than it saves. ``(reason, special)``: ``special`` for ``/`` and
    the home folder (no count makes them right); ``max_files_name`` is how the caller's user
    writes that setting."""
    real = Path(root).expanduser().resolve()
    special = ("the root of the file system" if real.parent == real
               else "your home folder" if real == Path.home().resolve() else None)
    cap, seconds = 10 * settings.max_files, 5.0 if special else 20.0
    n, complete = count_notes(real, settings, stop_after=cap, seconds=seconds)
    if complete and n <= settings.max_files and not special:
        return None
    counted = (f"{n:,} notes" if complete else f"more than {cap:,} notes" if n > cap
               else f"at least {n:,} notes found in {seconds:.0f} s of counting")
    if special:
        return f"{real} is {special} ({counted})", True
    return f"{real} holds {counted} ({max_files_name} is {settings.max_files:,})", False


def refuse_broad_root(root: Path, settings: Settings) -> None:
    """A server's first open of ``root``: :class:`BroadRootError` when :func:`broad_root_reason`
    says it needs a yes and ``allow_any_root`` does not give one (an index already there was
    agreed to before)."""
    if settings.allow_any_root or has_index(root, settings):
        return
    found = broad_root_reason(root, settings)
    if found is not None:
        raise BroadRootError(f"{found[0]}: not indexed. Open the folder that holds your notes, "
                             f"or set allow_any_root (allowAnyRoot) to index it anyway")


def index_dir_of(root: Path | str, settings: Settings,
                 index_dir: Path | str | None = None) -> Path:
    """The folder of ``root``'s index: ``index_dir``, else the setting, else the default one
    in the user cache (the rule every reader and the workspace follow)."""
    chosen = index_dir or settings.index_dir
    return (Path(chosen).expanduser().resolve() if chosen
            else default_index_dir(Path(root).expanduser()))


def has_index(root: Path | str, settings: Settings, index_dir: Path | str | None = None) -> bool:
    """Whether ``root`` has an index for these settings' embedding space (a read open would
    succeed); reads only."""
    idx = index_dir_of(root, settings, index_dir)
    return (idx / f"{space_name(settings)}.sqlite3").is_file()


def not_indexed_reason(root: Path | str, settings: Settings) -> str:
    """What to tell a person whose read found no index of ``root`` for these settings: how to
    make one, and which models it is indexed with when only another model's index is there
    (each model has an index of its own)."""
    idx = index_dir_of(root, settings)
    want = space_model_name(settings)
    others = sorted({m for f in idx.glob("*.sqlite3") if f.stem != space_name(settings)
                     if (m := recorded_model(f)) and m != want})
    if others:
        return (f"{root} is indexed with {', '.join(others)}, not with {want} (each model has "
                f"an index of its own): run `mdsearch index {root}` with the same model setting "
                f"to build it")
    return f"{root} is not indexed yet: run `mdsearch index {root}`"


def space_name(settings: Settings) -> str:
    """Collection name for one embedding space: changing model or chunking starts a new one
    (and so does the int8 backend, whose vectors differ: ``space_model_name``)."""
    model = re.sub(r"[^A-Za-z0-9._-]+", "-", space_model_name(settings)).strip("-._")
    chunking_key = f"c{settings.chunk_size}-o{settings.chunk_overlap}"
    return f"{model[:60] or 'model'}-{chunking_key}-v{SCHEMA_VERSION}"


INDEX_ID_META = "index_id"
"""Manifest meta: a random id of this index, written when its manifest is made (or, for one
made before, at its next write open): what names its collection on a Chroma server."""


def collection_name(settings: Settings, index_id: str) -> str:
    """The Chroma collection of one embedding space of one index (``index_id``: its manifest's
    :data:`INDEX_ID_META`).

    In the index folder's own Chroma it is the space's name. On a Chroma server (``chroma_url``)
    many indexes share one namespace, so the name also carries the index's id: random, made
    with the index, so two folders, two people, or two machines cloned from one image (the same
    ``/etc/machine-id``, the same paths) never share a collection. An index made anew (its
    folder deleted, a damaged manifest set aside) gets a new collection; the old one stays on
    the server until someone deletes it."""
    space = space_name(settings)
    return f"{space}-i{index_id}" if settings.chroma_url else space


PRIVATE_FOLDER, PRIVATE_FILE = 0o700, 0o600
"""The modes of an index's folders and files: the manifest holds every section's full text, so
an index is as private as the notes it was built from, whatever the notes folder's own modes.
What the process creates later (Chroma's segments, SQLite's WAL, the logs) gets them from the
umask that the entry points set (``cli.run``: group and other bits off);
:func:`make_private` fixes what an older release or a library caller left open."""
OTHER_OWNER_ENV = "MDSEARCH_ALLOW_OTHER_OWNER"
"""Set to 1 to read or write an index that another user owns (:func:`refuse_foreign`)."""
_POSIX = os.name != "nt"  # Windows: modes are ACLs there; these rules are no-ops


def make_private(index_dir: Path) -> None:
    """Before a write open: create ``index_dir`` (and any missing parent, such as ``~/.cache``)
    as 0700, and take the group and other bits off it, its files, its Chroma and ``damaged-*``
    folders (no other folder of an ``--index-dir``) and the mdsearch cache folders above it
    (never a folder of the person's own, such as the notes folder of an index kept inside it).
    Said once, when others could reach them (the index folder or a cache folder was open; a file
    a library caller's Chroma left 0644 inside a private folder was out of reach, and is fixed
    quietly); the next open finds none. Nothing on Windows."""
    missing = [p for p in (index_dir, *index_dir.parents) if not p.exists()]
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # (a process beside this one made it)
            folder.mkdir(PRIVATE_FOLDER)
    if not _POSIX:
        return
    cache = cache_root().resolve()
    tops = [p for p in (cache, cache / "indexes") if p in index_dir.parents]
    opened = sum(_private(p) for p in (*tops, index_dir))
    inside = 0
    for here, folders, names in os.walk(index_dir):
        if here == str(index_dir):  # the folders mdsearch makes: an --index-dir may hold more
            folders[:] = [f for f in folders if f == "chroma" or f.startswith(DAMAGED_PREFIX)]
        inside += sum(_private(Path(here, n)) for n in (*folders, *names))
    if opened:
        log.warning(
            "%d file(s) and folder(s) of the index in %s were readable by other users: made "
            "them private (folders 0700, files 0600)", opened + inside, index_dir)


def _private(path: Path) -> bool:
    """Take the group and other bits off ``path`` (never through a link, never the owner's
    own); whether they were there."""
    with contextlib.suppress(OSError):
        st = path.lstat()
        if not path.is_symlink() and st.st_mode & 0o077:
            path.chmod(st.st_mode & 0o700)
            return True
    return False


def refuse_foreign(index_dir: Path) -> Path:
    """``index_dir``, or :class:`ForeignIndexError` when it belongs to another user, unless
    ``MDSEARCH_ALLOW_OTHER_OWNER=1``: reading it would show that user's notes to this one (and
    writing it, as root, would leave files its owner cannot open). Not on Windows."""
    if not _POSIX or os.environ.get(OTHER_OWNER_ENV) == "1":
        return index_dir
    try:
        uid = index_dir.stat().st_uid
    except OSError:  # nothing there yet: nothing of anyone's to read
        return index_dir
    if uid == os.geteuid():
        return index_dir
    import pwd  # (POSIX only: Windows has no such module)

    try:
        owner = f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        owner = f"uid {uid}"
    raise ForeignIndexError(
        f"the index in {index_dir} belongs to {owner}, not to you: it holds the text of their "
        f"notes, so mdsearch does not open it. Index your own copy (or pass --index-dir to a "
        f"folder of yours); if it is yours to read (a shared account, a copy you trust), set "
        f"{OTHER_OWNER_ENV}=1")


DAMAGED_PREFIX = "damaged-"
"""Damaged files are moved into ``<index dir>/damaged-<time>/``; the newest few are kept."""
KEEP_DAMAGED = 3
"""How many ``damaged-*`` folders an index keeps: a second repair must not delete the evidence
of the first (a person may not have looked yet), and a loop of repairs must not fill the disk."""

class ProcessLock:
    """An exclusive lock that goes with its process however the process ends, on Linux, macOS
    and Windows alike: an exclusive transaction that SQLite keeps open on a small file of its own.
    SQLite's file locking is the work (POSIX advisory locks on Unix, ``LockFileEx`` on Windows),
    tested code on every system, with no ``fcntl`` or ``msvcrt`` of ours. Nothing else of this
    process may open that file (a POSIX lock drops when any descriptor of its file closes)."""

    def __init__(self, path: Path, busy: str) -> None:
        """Take the lock at ``path`` now, or raise :class:`IndexLockedError` with ``busy``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=OFF")  # (nothing is written: no journal file)
            conn.execute("BEGIN EXCLUSIVE")
        except sqlite3.Error:
            conn.close()
            raise IndexLockedError(busy) from None
        self._conn: sqlite3.Connection | None = conn

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def index_lock(index_dir: Path) -> ProcessLock:
    """The writer lock of an index: whoever has it is the index's one holder."""
    make_private(index_dir)
    return ProcessLock(index_dir / "holder.lock",
                       f"another mdsearch process holds the index in {index_dir}")


@dataclass(frozen=True)
class IndexState:
    """How complete the index is, so an empty result is never mistaken for "no match".

    ``state``: ``ready`` (the last index run finished), ``building`` (a run is under way, in this
    process or another), ``interrupted`` (a run stopped before the end and nobody is finishing
    it: the next write open continues it) or ``empty`` (nothing indexed yet).
    """

    state: str
    files_done: int = 0
    files_total: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "files_done": self.files_done,
                "files_total": self.files_total}


FORMATS_META = "include_formats"
"""Manifest meta: the ``include_formats`` of the last full scan, comma-separated."""


def index_formats(root: Path | str, settings: Settings) -> tuple[str, ...] | None:
    """The document formats ``root``'s index was last built with (None: no index, or one
    built before they were recorded), so a command that does not name them keeps them."""
    idx = index_dir_of(root, settings)
    return formats_recorded(recorded_model(idx / f"{space_name(settings)}.sqlite3",
                                           FORMATS_META))


def formats_recorded(value: str | None) -> tuple[str, ...] | None:
    """The formats a manifest's meta value names (None: none recorded); a process that holds
    the manifest reads the value on its own connection (a new one costs a server 2-3 ms)."""
    return None if value is None else tuple(f for f in value.split(",") if f)


def recorded_model(manifest: Path, key: str = "model") -> str | None:
    """The model a space's manifest records (None: unreadable, or made before it was kept);
    ``key``: another of its meta values."""
    if not manifest.is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{manifest}?mode=ro", uri=True, timeout=1)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return str(row[0]) if row else None

