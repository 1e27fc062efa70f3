"""Opening an index as its holder: the stores, the repair of what a crash left, and damage
healed by setting the damaged files aside, so damage is never a reason to lock a person out.

:func:`open_writer` opens the manifest (the truth: notes, chunks, keywords and every vector) and
the Chroma collection (the vector index searches read), makes Chroma agree with the manifest
(a full comparison of ids only when the last holder did not close cleanly or the counts
differ), checks Chroma's graph with a few lookups, and hands back an :class:`Opened` index. The
workspace holds it; nothing here searches.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import socket
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.embedding import Embedder
from mdsearch_ls.engine.errors import IndexOpenError, MdsearchError
from mdsearch_ls.engine.index.chroma_server import check
from mdsearch_ls.engine.index.indexer import Indexer
from mdsearch_ls.engine.index.layout import (
    DAMAGED_PREFIX,
    INDEX_ID_META,
    KEEP_DAMAGED,
    collection_name,
    recorded_model,
)
from mdsearch_ls.engine.index.manifest import Manifest
from mdsearch_ls.engine.index.manifest_schema import is_damage
from mdsearch_ls.engine.index.vector_store import (
    VECTORS_AT,
    ChromaStore,
    StoreError,
    short_error,
)

log = logging.getLogger("mdsearch_ls.engine.workspace")

KEEP_OTHER_SPACES = 1
"""Embedding spaces of other settings kept beside the open one (the most recently opened first),
so switching a setting back and forth re-embeds nothing while a third one frees the oldest."""
PROBES = 8
"""How many stored vectors an open looks up in Chroma to tell a sound graph from a broken one."""


@dataclass
class Opened:
    """An index opened by its holder, and what the open found, for a person to read once."""

    manifest: Manifest
    store: ChromaStore
    indexer: Indexer
    healed: str | None = None
    """What was damaged and what opening did about it; None when the index opened sound."""
    vectors_moved: str | None = None
    """The vectors were last kept elsewhere, so this open filled its store from the cache."""
    switched: str | None = None
    """Why this open started a new embedding space beside an index of other settings."""
    repaired: int = 0
    """How many of Chroma's ids a crash had left out of step with the manifest."""
    emptied: bool = False
    """The manifest was new while the collection held an index: the collection was emptied."""
    dropped: list[str] = field(default_factory=list)
    """The embedding spaces of older settings this open deleted."""


class _Damaged(Exception):
    """One part of the index (``manifest`` or ``vector store``) is damaged."""

    def __init__(self, part: str, detail: str, paths: list[Path]) -> None:
        super().__init__(f"{part}: {detail}")
        self.part = part
        self.detail = detail
        self.paths = paths


def open_writer(root: Path, settings: Settings, embedder: Embedder, index_dir: Path,
                space: str) -> Opened:
    """Open the manifest and Chroma of ``space`` in ``index_dir``; a damaged one is set aside and
    rebuilt.

    The index is a cache of the notes, so damage (a file truncated or overwritten, a schema of
    another version, Chroma failing to open or to find its own vectors) is never a reason to
    lock the user out: the damaged files move to ``damaged-<time>/`` inside the index folder
    (the newest few are kept, for a bug report) and the index starts anew. A damaged Chroma
    alone costs no model time: the manifest's vector cache refills it. A Chroma server's
    collection is not ours to move aside: a damaged one is emptied instead.
    """
    found: list[str] = []
    moved: set[str] = set()
    damaged_dir: Path | None = None
    reset = False
    while True:
        try:
            opened = _open_once(root, settings, embedder, index_dir, space, reset=reset)
        except _Damaged as damage:
            if damage.part in moved:  # damaged again right after a fresh start: give up
                raise IndexOpenError(
                    f"the index in {index_dir} cannot be opened ({damage.detail}) even "
                    f"after setting the damaged one aside; delete that folder and try again"
                ) from damage.__cause__
            moved.add(damage.part)
            found.append(f"{damage.part}: {damage.detail}")
            if damage.paths:
                damaged_dir = _set_aside(index_dir, damage, damaged_dir)
            else:
                reset = True
            continue
        break
    if opened.emptied and "manifest" not in moved:
        found.append("manifest: empty, while the vector store held an index")
    if found:
        rebuild = "manifest" in moved or opened.manifest.created
        action = ("it is rebuilt from the notes" if rebuild else "its vectors were restored "
                  "from the manifest's cache, with nothing to re-embed")
        where = f" The damaged files were moved to {damaged_dir}." if damaged_dir else ""
        opened.healed = (f"the index of {root} was damaged ({'; '.join(found)}): "
                         f"{action}.{where}")
        log.info("%s", opened.healed)  # the front end shows it (CLI stderr, showMessage)
    try:
        opened.switched = _note_switch(root, opened.manifest, embedder, index_dir, space)
        opened.dropped = _prune_spaces(opened.store, index_dir, space)
    except BaseException:
        close_stores(opened)
        raise
    return opened


def _open_once(root: Path, settings: Settings, embedder: Embedder, index_dir: Path,
               space: str, *, reset: bool) -> Opened:
    """One attempt at opening both stores; raises :class:`_Damaged` naming the damaged one."""
    path = index_dir / f"{space}.sqlite3"
    manifest_files = [path.with_name(path.name + s) for s in ("", "-wal", "-shm")]
    chroma_dir = index_dir / "chroma"
    try:
        manifest = Manifest(path)
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            raise _Damaged("manifest", str(exc), manifest_files) from exc
        raise IndexOpenError(f"the manifest in {index_dir} cannot be opened ({exc})") from exc
    if not manifest.get_meta(INDEX_ID_META):  # (a manifest made before the ids)
        manifest.set_meta(INDEX_ID_META, secrets.token_hex(6))
        if settings.chroma_url and not manifest.created:
            log.warning("the index's collection on %s is now named by an id of its own "
                        "(two machines cloned from one image shared the old name): its "
                        "vectors are restored there from the manifest, and the collection "
                        "of the old name can be deleted", settings.chroma_url)
    try:
        store = _make_store(settings, chroma_dir, index_dir, space, manifest)
    except StoreError as exc:
        manifest.close()
        raise _Damaged("vector store", short_error(exc.__cause__ or exc), [chroma_dir]) \
            from exc
    except BaseException:
        manifest.close()
        raise
    damaged_files = [] if store.remote else [chroma_dir]
    opened = Opened(manifest, store, Indexer(root, settings, manifest, store, embedder,
                                             index_dir=index_dir))
    try:
        opened.emptied = manifest.created and store.count() > 0
        if reset or opened.emptied:
            store.reset()  # damaged, or a new manifest: the old collection agrees with nothing
        # The manifest is the truth: repair what a crash between the Chroma write and the
        # manifest write left, before anything reads.
        opened.vectors_moved = _note_move(root, manifest, settings, chroma_dir)
        opened.repaired = opened.indexer.reconcile(moved=opened.vectors_moved is not None)
        problem = store.probe(manifest.sample_vectors(PROBES))
        if manifest.get_meta(VECTORS_AT) != (here := settings.chroma_url or ""):
            manifest.set_meta(VECTORS_AT, here)
    except sqlite3.DatabaseError as exc:
        close_stores(opened)
        if is_damage(exc):
            raise _Damaged("manifest", str(exc), manifest_files) from exc
        raise
    except (OSError, MdsearchError):
        close_stores(opened)
        raise
    except Exception as exc:  # anything else Chroma raises on a sound index is damage
        close_stores(opened)
        raise _Damaged("vector store", short_error(exc), damaged_files) from exc
    if problem:
        close_stores(opened)
        raise _Damaged("vector store", problem, damaged_files)
    return opened


def _make_store(settings: Settings, chroma_dir: Path, index_dir: Path, space: str,
                manifest: Manifest) -> ChromaStore:
    """The vector store of this space: the index folder's own Chroma, or a collection on the
    Chroma server the settings name, under the random id the manifest got when it was made
    (:func:`collection_name`): two indexes never share one, even cloned from one disk image."""
    url = settings.chroma_url
    if not url:
        return ChromaStore(chroma_dir, space, batch_size=settings.batch_size)
    return ChromaStore(None, collection_name(settings, manifest.get_meta(INDEX_ID_META) or ""),
                       url=url, space=space, batch_size=settings.batch_size,
                       label=f"{socket.gethostname()}:{index_dir}")


def check_vector_server(settings: Settings) -> None:
    """Before an open creates anything (the index folder, the lock, a manifest): when the
    vectors live on a Chroma server, it must answer, or the open stops with a
    :class:`VectorServerError` and nothing is written."""
    if settings.chroma_url:
        check(settings.chroma_url)


def _note_move(root: Path, manifest: Manifest, settings: Settings, chroma_dir: Path
               ) -> str | None:
    """When the last holder kept the vectors elsewhere (a Chroma server, the index folder,
    another server), this open copies what the store it has lacks from the vector cache: say
    so before the copy, which takes minutes at a million chunks, because the usual cause is a
    ``chroma_url`` set in one front end and forgotten in another."""
    was, here = manifest.get_meta(VECTORS_AT), settings.chroma_url or ""
    if was is None or was == here or not (chunks := manifest.counts()[1]):
        return None
    old = f"on the Chroma server at {was}" if was else f"in {chroma_dir}"
    new = f"on the Chroma server at {here}" if here else f"in {chroma_dir}"
    back = f" Set chroma_url (--chroma-url) to {was} to keep using it." if was else ""
    said = (f"{root}: the vectors of this index were kept {old}; this open keeps them {new} "
            f"and copies there what they lack of its {chunks:,} chunks from the index's vector "
            f"cache (nothing is embedded again; a million chunks into an empty store take "
            f"minutes).{back}")
    log.warning("%s", said)  # now, before the copy (a front end shows it once, after)
    return said


def close_stores(opened: Opened, *, clean: bool = False) -> None:
    """Close both stores; ``clean``: a holder's clean close, whose token (in the collection, then
    in the manifest) lets the next open trust Chroma after two counts instead of comparing
    every id."""
    token = None
    if clean:
        try:
            token = opened.indexer.seal_store()
        except Exception as exc:  # a server gone: the next open compares in full
            log.warning("could not mark the vector store clean: %s", exc)
    with contextlib.suppress(Exception):
        opened.store.close()
    if token is not None:
        with contextlib.suppress(sqlite3.Error):
            opened.indexer.mark_store_clean(token)
    opened.manifest.close()


def _note_switch(root: Path, manifest: Manifest, embedder: Embedder, index_dir: Path,
                 space: str) -> str | None:
    """Record the model of a new space in its manifest, and when the index folder already holds
    other spaces, say what switching costs (their vectors are of another model or other chunks,
    never mixed with this one's)."""
    if not manifest.created:
        return None
    manifest.set_meta("model", embedder.name)
    newest: tuple[float, str] | None = None
    for f in index_dir.glob("*.sqlite3"):
        if f.stem != space:
            with contextlib.suppress(OSError):
                newest = max(newest or (0.0, ""), (f.stat().st_mtime, f.stem))
    if newest is None:
        return None
    model = recorded_model(index_dir / f"{newest[1]}.sqlite3")
    if model is not None and model != embedder.name:
        why = (f"it was indexed with the model {model}, and {embedder.name} is another "
               f"embedding space (its vectors are never compared with {model}'s)")
        back = f"switching back to {model}"
    else:
        why = "it was indexed with other chunking settings"
        back = "switching back"
    return (f"{root}: {why}: every note is embedded again, once. The other index is kept, so "
            f"{back} re-embeds nothing.")


def _prune_spaces(store: ChromaStore, index_dir: Path, space: str) -> list[str]:
    """Delete the manifests and collections of all but the newest other embedding spaces.

    Each model or chunking setting gets its own space, and without this every setting ever tried
    would keep its vectors on disk forever. A space's age is the mtime of its manifest, touched
    on every open; the holder alone opens any of them.
    """
    with contextlib.suppress(OSError):
        os.utime(index_dir / f"{space}.sqlite3")
    seen: dict[str, float] = {}
    for f in index_dir.glob("*.sqlite3"):
        if f.stem != space:
            with contextlib.suppress(OSError):
                seen[f.stem] = f.stat().st_mtime
    try:
        collections = store.other_collections()
    except Exception as exc:  # a listing failure must not stop the index from opening
        log.warning("could not list old index collections in %s: %s", index_dir, exc)
        collections = {}
    for name in collections:
        seen.setdefault(name, 0.0)  # a collection whose manifest is gone: oldest
    dropped = sorted(seen, key=lambda n: (-seen[n], n))[KEEP_OTHER_SPACES:]
    for name in dropped:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                (index_dir / f"{name}.sqlite3{suffix}").unlink()
        if name in collections:
            try:
                store.drop_collection(collections[name])
            except Exception as exc:
                log.warning("could not drop old index collection %s: %s", name, exc)
    if dropped:
        log.info("dropped the index of older settings: %s", ", ".join(dropped))
    return dropped


def _set_aside(index_dir: Path, damage: _Damaged, folder: Path | None) -> Path:
    """Move damaged files into this open's ``damaged-<time>`` folder (all but the newest
    ``KEEP_DAMAGED - 1`` older ones go); the folder they went to."""
    try:
        if folder is None:
            older = sorted(index_dir.glob(f"{DAMAGED_PREFIX}*"))
            for old in older[: max(0, len(older) - (KEEP_DAMAGED - 1))]:
                shutil.rmtree(old, ignore_errors=True)
            stamp = time.strftime("%Y%m%d-%H%M%S")
            folder = index_dir / f"{DAMAGED_PREFIX}{stamp}"
            n = 1
            while folder.exists():  # two repairs within a second keep both
                folder = index_dir / f"{DAMAGED_PREFIX}{stamp}-{n}"
                n += 1
            folder.mkdir(parents=True)
        for p in damage.paths:
            if p.exists():
                os.replace(p, folder / p.name)
    except OSError as exc:
        raise IndexOpenError(
            f"the index in {index_dir} is damaged ({damage.part}: {damage.detail}) and could "
            f"not be set aside ({exc}); delete that folder to rebuild it"
        ) from exc
    return folder


def damage_error(index_dir: Path, root: Path, manifest: Manifest | None,
                 exc: sqlite3.DatabaseError) -> IndexOpenError:
    """What a search says about a manifest it cannot read. Damage met drops the seal, so the
    next open reads every page and heals it."""
    if is_damage(exc) and manifest is not None:
        manifest.met_damage()
    if is_damage(exc):
        return IndexOpenError(
            f"the index in {index_dir} is damaged ({exc}); it is rebuilt from the notes the "
            f"next time it is opened (run `mdsearch index {root}`, or restart the editor's "
            f"mdsearch server)")
    return IndexOpenError(f"the manifest in {index_dir} cannot be read ({exc})")


__all__ = ["Opened", "check_vector_server", "close_stores", "damage_error", "open_writer"]
