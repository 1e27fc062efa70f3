"""Opening an index as its writer: the stores, the repair of what a crash left, and damage
healed by setting the damaged files aside, so damage is never a reason to lock a person out.

:class:`WriterOpen` is the part of :class:`~mdsearch_ls.engine.workspace.Workspace` that only
needs the index layer (manifest, vector store, indexer); the workspace adds search and writing.
"""

from __future__ import annotations

import contextlib
import glob
import json
import logging
import os
import secrets
import shutil
import socket
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.embedding import Embedder
from mdsearch_ls.engine.errors import IndexOpenError, MdsearchError
from mdsearch_ls.engine.index.layout import (
    DAMAGED_PREFIX,
    INDEX_ID_META,
    KEEP_DAMAGED,
    LockRole,
    collection_name,
    recorded_model,
)
from mdsearch_ls.engine.index.manifest import Manifest, is_damage
from mdsearch_ls.engine.index.vector_store import (
    BEHIND,
    DEFERRED,
    STORE_CLEAN,
    STORE_FILES,
    VECTORS_AT,
    ChromaStore,
    DeferredStore,
    StoreError,
    chunk_metadata,
    folder_fingerprint,
    sealed_as,
    short_error,
)

if TYPE_CHECKING:
    from mdsearch_ls.engine.index.indexer import Indexer

log = logging.getLogger("mdsearch_ls.engine.workspace")

# Embedding spaces of other settings kept beside the open one (the most recently opened first),
# so switching a setting back and forth re-embeds nothing while a third one frees the oldest.
KEEP_OTHER_SPACES = 1

# How many stored vectors an open looks up in Chroma to tell a sound graph from a broken one.
_PROBES = 8


class _Damaged(Exception):
    """Internal: one part of the index (``manifest`` or ``vector store``) is damaged."""

    def __init__(self, part: str, detail: str, paths: list[Path]) -> None:
        super().__init__(f"{part}: {detail}")
        self.part = part
        self.detail = detail
        self.paths = paths


def _cause(exc: BaseException) -> str:
    """The message of the error under a wrapper (StoreError adds its own words)."""
    return short_error(exc.__cause__ or exc)


class WriterOpen:
    """The writer's open of an index folder; see the module docstring."""

    root: Path
    settings: Settings
    embedder: Embedder
    index_dir: Path
    space: str
    manifest: Manifest
    store: ChromaStore | DeferredStore | None
    indexer: Indexer | None
    healed: str | None
    repaired: int | None
    _damaged_dir: Path | None
    _stale_vectors: bool
    _defer_vectors: bool = False
    """Open without the vector store (:class:`DeferredStore`): a writer of a few notes."""
    _role: LockRole = "command"
    """A server opens Chroma at its first write (sealed, or left behind by a deferred writer:
    :meth:`_behind_only`), not before its first answer."""
    _lagging: bool = False
    """Chroma lacks what a deferred writer wrote, until the first write catches it up."""
    _reset_remote: bool = False
    """A Chroma server's collection failed the probe: empty it on the next attempt, and the
    manifest's vector cache refills it (there are no files of ours to set aside)."""

    @property
    def _chroma_dir(self) -> Path:
        return self.index_dir / "chroma"

    @property
    def _manifest_path(self) -> Path:
        return self.index_dir / f"{self.space}.sqlite3"

    def _open_healing(self) -> None:
        """Open the manifest and Chroma as the writer; a damaged one is set aside and rebuilt.

        The index is a cache of the notes, so damage (a file truncated or overwritten, a
        schema of another version, Chroma failing to open or to find its own vectors) is never
        a reason to lock the user out: the damaged files move to ``damaged-<time>/`` inside the
        index folder (only the newest such folder is kept, for a bug report) and the index
        starts anew. A damaged Chroma alone costs no model time: the manifest's vector cache
        refills it. What happened is in :attr:`healed`, for the front end to show once.
        """
        found: list[str] = []
        moved: set[str] = set()
        while True:
            try:
                self._open_stores()
            except _Damaged as damage:
                self._close_stores()
                if damage.part in moved:  # damaged again right after a fresh start: give up
                    raise IndexOpenError(
                        f"the index in {self.index_dir} cannot be opened ({damage.detail}) even "
                        f"after setting the damaged one aside; delete that folder and try again"
                    ) from damage.__cause__
                moved.add(damage.part)
                found.append(f"{damage.part}: {damage.detail}")
                if damage.paths:
                    self._set_aside(damage)
                else:
                    self._reset_remote = True
                continue
            break
        assert self.store is not None and self.indexer is not None
        if self._stale_vectors and "manifest" not in moved:
            found.append("manifest: empty, while the vector store held an index")
        if found:
            rebuild = "manifest" in moved or self.manifest.created
            action = ("it is rebuilt from the notes" if rebuild else
                      "its vectors were restored from the manifest's cache, with nothing to "
                      "re-embed")
            where = f" The damaged files were moved to {self._damaged_dir}." if moved else ""
            self.healed = (f"the index of {self.root} was damaged ({'; '.join(found)}): "
                           f"{action}.{where}")
            log.info("%s", self.healed)  # the front end shows it (CLI stderr, showMessage)

    def _open_stores(self) -> None:
        """One attempt at opening both stores; raises :class:`_Damaged` naming the damaged one."""
        # here, not at the top: a read-only open (a search, `status`) never writes, and the
        # writer's modules are a tenth of such a process's start-up
        from mdsearch_ls.engine.index.indexer import Indexer

        chroma_dir = self.index_dir / "chroma"
        path = self._manifest_path
        manifest_files = [path.with_name(path.name + s) for s in ("", "-wal", "-shm")]
        try:
            self.manifest = Manifest(path)
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise _Damaged("manifest", str(exc), manifest_files) from exc
            raise IndexOpenError(f"the manifest in {self.index_dir} cannot be opened ({exc})") \
                from exc
        if not self.manifest.get_meta(INDEX_ID_META):  # (a manifest made before the ids)
            self.manifest.set_meta(INDEX_ID_META, secrets.token_hex(6))
            if self.settings.chroma_url and not self.manifest.created:
                log.warning("the index's collection on %s is now named by an id of its own "
                            "(two machines cloned from one image shared the old name): its "
                            "vectors are restored there from the manifest, and the collection "
                            "of the old name can be deleted", self.settings.chroma_url)
        if self._defer_vectors and not self.manifest.created:
            was = self.manifest.get_meta(STORE_CLEAN)
            self.store = DeferredStore(DEFERRED if was else "", self._note_behind)
            self.indexer = Indexer(self.root, self.settings, self.manifest, self.store,
                                   self.embedder, index_dir=self.index_dir)
            self.repaired = 0
            return
        fingerprint = folder_fingerprint(chroma_dir)  # before Chroma's own open touches it
        # A server trusts a local store as its last clean close left it (sealed, or behind a
        # deferred writer only) without opening it: Chroma's import and client (0.6 s), and its
        # graph (200 MB, a second at 96k), wait for its first write, which checks the seal's
        # token first, or compares ids and catches up what a deferred writer left behind (a
        # search meanwhile asks the vector snapshot; it asks no Chroma behind a deferred
        # writer). A command (`mdsearch index`) checks and catches up now, and seals, so the
        # next no-op index can answer read-only.
        self._lagging = self._behind_only(fingerprint)
        unopened = (self._role == "server" and not self.settings.chroma_url
                    and not self.manifest.created
                    and (self._lagging or sealed_as(self.manifest, fingerprint)))
        try:
            self.store = self._make_store(chroma_dir, opened=not unopened)
        except StoreError as exc:
            raise _Damaged("vector store", _cause(exc), [chroma_dir]) from exc
        # A server's collection is not ours to move aside: a damaged one is emptied instead.
        damaged_files = [] if self.store.remote else [chroma_dir]
        try:
            if self._reset_remote:
                self._reset_remote = False
                self.store.reset()
            self._stale_vectors = self.manifest.created and self.store.count() > 0
            if self._stale_vectors:
                # A new manifest: the old collection has nothing left to agree with.
                self.store.reset()
            self.indexer = Indexer(
                self.root, self.settings, self.manifest, self.store, self.embedder,
                index_dir=self.index_dir,
            )
            if unopened:
                self.repaired, problem, self.indexer.trusted = 0, None, True
                self.indexer.behind = self._catch_up_deferred
            elif self._untouched_since_sealed(fingerprint):
                self.repaired, problem, self.indexer.trusted = 0, None, True
            else:
                # The manifest is the truth: repair what a crash between the Chroma write and
                # the manifest write left, before anything reads (``--no-update``, status).
                self.vectors_moved = self._note_move()
                self.repaired = self.indexer.reconcile(moved=self.vectors_moved is not None)
                self._catch_up()
                problem = self.store.probe(self.manifest.sample_vectors(_PROBES))
            if self.manifest.get_meta(VECTORS_AT) != (here := self.settings.chroma_url or ""):
                self.manifest.set_meta(VECTORS_AT, here)
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise _Damaged("manifest", str(exc), manifest_files) from exc
            raise
        except (OSError, MdsearchError):
            raise
        except Exception as exc:  # anything else Chroma raises on a sound index is damage
            raise _Damaged("vector store", short_error(exc), damaged_files) from exc
        if problem:
            raise _Damaged("vector store", problem, damaged_files)

    def _note_move(self) -> str | None:
        """When the last writer kept the vectors elsewhere (a Chroma server, the index folder,
        another server), this open copies what the store it has lacks from the vector cache: say
        so before the copy, which takes minutes at a million chunks, because the usual cause is
        a ``chroma_url`` set in one front end and forgotten in another."""
        was, here = self.manifest.get_meta(VECTORS_AT), self.settings.chroma_url or ""
        if was is None or was == here or not (chunks := self.manifest.counts()[1]):
            return None
        old = f"on the Chroma server at {was}" if was else f"in {self._chroma_dir}"
        new = f"on the Chroma server at {here}" if here else f"in {self._chroma_dir}"
        back = f" Set chroma_url (--chroma-url) to {was} to keep using it." if was else ""
        said = (f"{self.root}: the vectors of this index were kept {old}; this open keeps them "
                f"{new} and copies there what they lack of its {chunks:,} chunks from the "
                f"index's vector cache (nothing is embedded again; a million chunks into an "
                f"empty store take minutes).{back}")
        log.warning("%s", said)  # now, before the copy (a front end shows it once, after)
        return said

    def _seal_and_close(self, *, release: bool = False) -> None:
        """Close the vector store cleanly (``release``: to be opened again on its next use):
        a new clean-close token in the collection, then, once Chroma's files are final, in the
        manifest with a fingerprint of those files; the next open that finds both unchanged
        trusts Chroma without reading its graph (a count or a probe reads all of it: 200 MB and
        a second at 96k chunks)."""
        assert self.store is not None
        token = None
        if self.indexer is not None:
            try:
                # Written here: the counts must agree before a seal vouches for the collection
                # (the graph is loaded by the writes already; a store only read is not counted).
                agree = not self.store.written or (
                    self.store.count() == self.manifest.counts()[1])
                token = self.indexer.seal_store() if agree else None
            except Exception as exc:  # a server gone: the next open compares in full
                log.warning("could not mark the vector store clean: %s", exc)
        if release:
            self.store.release()
        else:
            self.store.close()
        if token is not None and self.indexer is not None:
            with contextlib.suppress(sqlite3.Error):
                self.indexer.mark_store_clean(token)
                if not self.store.remote:
                    self.manifest.set_meta(STORE_FILES, folder_fingerprint(self._chroma_dir))

    def _untouched_since_sealed(self, fingerprint: str) -> bool:
        """Chroma's folder is as the last clean close left it, and the tokens agree: what the
        count and the probe would check, known without reading the graph."""
        assert self.store is not None
        return (not self.store.remote and sealed_as(self.manifest, fingerprint)
                and self.store.marker() == self.manifest.get_meta(STORE_CLEAN))

    def _behind_only(self, fingerprint: str) -> bool:
        """Chroma's folder is as its last clean close left it, and only a deferred writer (which
        never touches Chroma, and marks the manifest so only after a clean state) wrote since."""
        return (not self.settings.chroma_url and self.manifest.get_meta(STORE_CLEAN) == DEFERRED
                and fingerprint == self.manifest.get_meta(STORE_FILES))

    def _catch_up_deferred(self) -> None:
        """Before the first write to a Chroma trusted behind a deferred writer (or trusted as
        sealed without being opened): compare ids (what the deferred writer deleted; two counts
        and the tokens, when it is clean) and write what it left behind, as an open would."""
        assert self.indexer is not None
        self.indexer.reconcile()
        self._catch_up()
        searcher = getattr(self, "searcher", None)
        if searcher is not None:
            searcher.store = self.store

    def _searchable_store(self) -> ChromaStore | None:
        """What a search may ask besides the vector snapshot (past 100k chunks, with none to
        map): not a Chroma behind a deferred writer, which lacks its notes until the first write
        catches it up; a sealed store not opened yet is whole, and opens when asked."""
        caught_up = self.indexer is not None and self.indexer.behind is None
        lagging = self._lagging and not caught_up
        return None if isinstance(self.store, DeferredStore) or lagging else self.store

    def _note_behind(self, paths: set[str]) -> None:
        """A :class:`DeferredStore` wrote these notes without Chroma: list them for the next
        writer that opens it (before the manifest's own write, so a crash loses no name)."""
        behind = set(json.loads(self.manifest.get_meta(BEHIND) or "[]"))
        if not paths <= behind:
            self.manifest.set_meta(BEHIND, json.dumps(sorted(behind | paths)))

    def _catch_up(self) -> None:
        """Write the chunks of the notes a deferred writer left behind into Chroma, vectors
        from the cache: the comparison of ids before this put back what was missing, and this
        refreshes what an id does not show (a section's lines, a note's mtime and tags)."""
        import numpy as np

        assert self.store is not None and self.indexer is not None
        behind = json.loads(self.manifest.get_meta(BEHIND) or "[]")
        for batch in (behind[i:i + 500] for i in range(0, len(behind), 500)):
            files = self.manifest.files_of(batch)
            records = [r for p in batch if p in files for r in self.manifest.chunks_for(p)]
            vecs = self.manifest.vectors(r.embed_hash for r in records)
            records = [r for r in records if r.embed_hash in vecs]
            if records:
                self.indexer._writing_store()
                self.store.upsert([r.id for r in records],
                                  np.stack([vecs[r.embed_hash] for r in records]),
                                  [chunk_metadata(r, files[r.path]) for r in records])
        if behind:
            self.indexer._settled = True  # Chroma's writes needed no manifest write: it agrees
            self.manifest.set_meta(BEHIND, "")
            log.info("the vector store caught up with %d notes written without it", len(behind))

    def _note_switch(self) -> str | None:
        """Record the model of a new space in its manifest, and when the index folder already
        holds other spaces, say what switching costs (their vectors are of another model or
        other chunks, never mixed with this one's)."""
        if not self.manifest.created:
            return None
        self.manifest.set_meta("model", self.embedder.name)
        newest: tuple[float, str] | None = None
        for f in self.index_dir.glob("*.sqlite3"):
            if f.stem != self.space:
                with contextlib.suppress(OSError):
                    newest = max(newest or (0.0, ""), (f.stat().st_mtime, f.stem))
        if newest is None:
            return None
        other = newest[1]
        model = recorded_model(self.index_dir / f"{other}.sqlite3")
        if model is not None and model != self.embedder.name:
            why = (f"it was indexed with the model {model}, and {self.embedder.name} is another "
                   f"embedding space (its vectors are never compared with {model}'s)")
            back = f"switching back to {model}"
        else:
            why = "it was indexed with other chunking settings"
            back = "switching back"
        return (f"{self.root}: {why}: every note is embedded again, once. The other index is "
                f"kept, so {back} re-embeds nothing.")

    def vectors_where(self) -> str:
        """Where this index's vectors live, for ``status``: the index folder's Chroma, or the
        server and collection (what a person looks for when managing a shared server)."""
        url = self.settings.chroma_url
        if not url:
            return str(self.index_dir / "chroma")
        index_id = self.manifest.get_meta(INDEX_ID_META)
        if not index_id:  # a reader of an index made before the ids; its writer names it
            return f"{url} (collection named at the next write open)"
        return f"{url} (collection {collection_name(self.settings, index_id)})"

    def _check_vector_server(self) -> None:
        """Before a write open creates anything (the index folder, the lock, a manifest): when
        the vectors live on a Chroma server, it must answer, or the open stops with a
        :class:`VectorServerError` and nothing is written."""
        if self.settings.chroma_url:
            from mdsearch_ls.engine.index.chroma_server import check

            check(self.settings.chroma_url)

    def _make_store(self, chroma_dir: Path, *, opened: bool = True) -> ChromaStore:
        """The vector store of this space: the index folder's own Chroma, or a collection on
        the Chroma server the settings name, under a name that carries this index's id
        (:func:`collection_name`)."""
        url = self.settings.chroma_url
        if not url:
            return ChromaStore(chroma_dir, self.space, batch_size=self.settings.batch_size,
                               opened=opened)
        return ChromaStore(
            None, collection_name(self.settings, self.manifest.get_meta(INDEX_ID_META) or ""),
            url=url, space=self.space,
            batch_size=self.settings.batch_size,
            label=f"{socket.gethostname()}:{self.index_dir}",
        )

    def _close_stores(self) -> None:
        for part in (getattr(self, "store", None), getattr(self, "manifest", None)):
            if part is not None:
                with contextlib.suppress(Exception):
                    part.close()
        self.store = None
        self.indexer = None

    def _set_aside(self, damage: _Damaged) -> None:
        """Move damaged files into this open's ``damaged-<time>`` folder (all but the newest
        ``KEEP_DAMAGED - 1`` older ones go)."""
        folder = self._damaged_dir
        try:
            if folder is None:
                older = sorted(self.index_dir.glob(f"{DAMAGED_PREFIX}*"))
                for old in older[: max(0, len(older) - (KEEP_DAMAGED - 1))]:
                    shutil.rmtree(old, ignore_errors=True)
                stamp = time.strftime("%Y%m%d-%H%M%S")
                folder = self.index_dir / f"{DAMAGED_PREFIX}{stamp}"
                n = 1
                while folder.exists():  # two repairs within a second keep both
                    folder = self.index_dir / f"{DAMAGED_PREFIX}{stamp}-{n}"
                    n += 1
                folder.mkdir(parents=True)
                self._damaged_dir = folder
            for p in damage.paths:
                if p.exists():
                    os.replace(p, folder / p.name)
        except OSError as exc:
            raise IndexOpenError(
                f"the index in {self.index_dir} is damaged ({damage.part}: {damage.detail}) "
                f"and could not be set aside ({exc}); delete that folder to rebuild it"
            ) from exc

    def _damage_error(self, exc: sqlite3.DatabaseError) -> IndexOpenError:
        """What a reader says about a manifest it cannot read: the writer heals, not a reader.
        Damage met drops the seal, so the next writer's open reads every page and heals it."""
        if is_damage(exc) and getattr(self, "manifest", None) is not None:
            self.manifest.met_damage()
        if is_damage(exc):
            return IndexOpenError(
                f"the index in {self.index_dir} is damaged ({exc}); it is rebuilt from the notes "
                f"the next time it is opened for writing (run `mdsearch index {self.root}`, or "
                f"restart the editor's mdsearch server)"
            )
        return IndexOpenError(f"the manifest in {self.index_dir} cannot be read ({exc})")

    def _prune_spaces(self) -> list[str]:
        """Delete the manifests and collections of all but the newest other embedding spaces.

        Each model or chunking setting gets its own space, and without this every setting ever
        tried would keep its vectors on disk forever. A space's age is the mtime of its manifest,
        touched on every open; we hold the writer lock, so no other process has any space open.
        """
        assert self.store is not None
        if isinstance(self.store, DeferredStore) or self.store.released:
            return []  # the next open with the vector store prunes
        own = self.index_dir / f"{self.space}.sqlite3"
        with contextlib.suppress(OSError):
            os.utime(own)
        seen: dict[str, float] = {}
        for f in self.index_dir.glob("*.sqlite3"):
            if f.stem != self.space:
                with contextlib.suppress(OSError):
                    seen[f.stem] = f.stat().st_mtime
        try:
            collections = self.store.other_collections()
        except Exception as exc:  # a listing failure must not stop the index from opening
            log.warning("could not list old index collections in %s: %s", self.index_dir, exc)
            collections = {}
        for name in collections:
            seen.setdefault(name, 0.0)  # a collection whose manifest is gone: oldest
        dropped = sorted(seen, key=lambda n: (-seen[n], n))[KEEP_OTHER_SPACES:]
        for name in dropped:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    (self.index_dir / f"{name}.sqlite3{suffix}").unlink()
            for snapshot in self.index_dir.glob(f"{glob.escape(name)}.*"):  # its vector snapshot
                with contextlib.suppress(OSError):
                    snapshot.unlink()
            if name in collections:
                try:
                    self.store.drop_collection(collections[name])
                except Exception as exc:
                    log.warning("could not drop old index collection %s: %s", name, exc)
        if dropped:
            log.info("dropped the index of older settings: %s", ", ".join(dropped))
        return dropped
