"""The vector store: a Chroma collection, written in batches, never embedding by itself.

The collection lives in the index folder, or on a Chroma server when ``chroma_url`` names one
(:mod:`.chroma_server`: timeouts, retries, errors that name the server).

Chroma is used for what it is good at, the approximate-nearest-neighbour graph; the chunk text and
the truth about what is indexed live in the manifest. Three rules from experience with Chroma 1.x:
telemetry is off; writes go in batches no larger than ``client.get_max_batch_size()`` (larger
ones fail); and the collection is created with ``embedding_function=None`` so Chroma's default
embedder, which downloads a model, can never run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import chromadb
import numpy as np
from chromadb.api.shared_system_client import SharedSystemClient
from chromadb.config import Settings as ChromaSettings

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.errors import VectorServerError
from mdsearch_ls.engine.index import chroma_server
from mdsearch_ls.engine.locations import FileRecord, Location

log = logging.getLogger(__name__)

Metadata = Mapping[str, str | int | float | bool]


def chunk_metadata(loc: Location, file: FileRecord | None) -> dict[str, str | int | float]:
    """What the collection stores beside a chunk's vector: its location and its note's mtime
    and tags, so a Chroma ``where`` can filter by them (paths are what the searcher asks for)."""
    return {
        **loc.location_fields(),
        "mtime": float(file.mtime) if file else 0.0,
        "tags": ("," + ",".join(file.tags) + ",") if file and file.tags else "",
    }


class StoreError(RuntimeError):
    """The vector store could not be opened or written; the message says what to do."""


def _quiet_chroma() -> None:
    os.environ.setdefault("CHROMA_TELEMETRY", "False")
    for name in ("chromadb", "chromadb.telemetry", "posthog"):
        logging.getLogger(name).setLevel(logging.ERROR)


ID_PAGE = 200_000
"""Ids per ``get`` when listing a collection (a repair's full comparison)."""

MARKER_KEY = "mdsearch_clean"
"""Collection metadata: the token of the writer's last clean close, also kept in the manifest;
the two agree only when no write reached the collection since (see ``Indexer``)."""
STORE_CLEAN = "store_clean"
"""Manifest meta: the generation at which the holder last closed Chroma cleanly ("" while a
holder may have written Chroma past the manifest)."""
VECTORS_AT = "vectors_at"
"""Manifest meta: where the last writer kept the vectors (a Chroma server's URL, "" for the index
folder), so an open that keeps them elsewhere can say why it copies every one of them."""
EF_SEARCH = 800
"""The candidates Chroma's HNSW search keeps (``ef_search``; Chroma's default is 100). On the 96k
scale vault (tldr x12, twelve identical vectors of every section), 365 nl2bash questions, the
searcher's pool of 60, the share of the exact 10 / 50 nearest found: 100 gave 0.915 / 0.916,
200 0.973 / 0.970, 400 0.986 / 0.991, 800 0.992 / 0.996 (about 3 ms a query more than 100),
1600 1.000 / 0.999 (12 ms more); ``benchmarks/hnsw_bench.py``. ``max_neighbors`` stays Chroma's
16: 32 gave 0.920 / 0.945 at 100 for 1.4x the build, and a collection keeps it for life."""
LABEL_KEY = "mdsearch_index"
"""Collection metadata on a server: which machine and index folder the collection belongs to,
for a person listing the server's collections."""


class ChromaStore:
    """One collection of one embedding space: in a persistent Chroma directory (``path``), or on
    a Chroma server (``url``, see :mod:`.chroma_server`) when the settings name one."""

    written = False
    """Whether anything was written to the collection through this object (sealing checks the
    counts then: the graph is in memory anyway)."""

    def __init__(
        self,
        path: Path | None,
        collection: str,
        *,
        batch_size: int = Settings.batch_size,
        url: str | None = None,
        space: str | None = None,
        label: str = "",
    ) -> None:
        _quiet_chroma()
        self.path = path
        self.url = url
        self.name = collection
        # On a server the collection's name is the space's plus this index's key, and only
        # collections with the same key are this index's other spaces.
        self._suffix = collection[len(space):] if space and collection.startswith(space) else ""
        self._label = {LABEL_KEY: label} if url and label else {}
        self._client: Any = None
        self._col: Any = None
        self._want_batch, self._max_batch = batch_size, 0
        if url is not None:
            self._client = chroma_server.Retrying(chroma_server.connect(url), url)
            try:
                self._col = self._open_collection(collection)
            except BaseException:
                self.close()
                raise
        else:
            self._open_local(path, collection)

    @property
    def max_batch(self) -> int:
        """The client's largest write (5,461 ids for Chroma 1.5's local store)."""
        if not self._max_batch:
            self._max_batch = int(self._client.get_max_batch_size())
        return self._max_batch

    @property
    def batch_size(self) -> int:
        return max(1, min(self._want_batch, self.max_batch))

    @property
    def remote(self) -> bool:
        """Whether the vectors live on a Chroma server rather than in the index folder."""
        return self.url is not None

    def _open_local(self, path: Path | None, collection: str) -> None:
        if path is None:
            raise ValueError("a local store needs a path")
        path.mkdir(parents=True, exist_ok=True)
        try:
            self._client = chromadb.PersistentClient(
                path=str(path),
                settings=ChromaSettings(anonymized_telemetry=False, allow_reset=False),
            )
            self._col = self._open_collection(collection)
        except Exception as exc:
            self.close()
            _forget_system(path)
            raise StoreError(
                f"could not open the vector index in {path}: {short_error(exc)}"
            ) from exc

    def _open_collection(self, name: str) -> Any:
        col = self._client.get_or_create_collection(
            name=name,
            metadata={"hnsw:space": "cosine", **self._label},
            configuration={"hnsw": {"space": "cosine", "ef_search": EF_SEARCH}},
            embedding_function=None,
        )
        if self.url is not None:
            col = chroma_server.Retrying(col, self.url)
        if (col.configuration_json.get("hnsw") or {}).get("ef_search") != EF_SEARCH:
            # a collection made before (Chroma keeps its own configuration): set before its
            # graph is loaded, which reads it
            col.modify(configuration={"hnsw": {"ef_search": EF_SEARCH}})
        return col

    def marker(self) -> str | None:
        """The clean-close token the collection holds (read when it was opened)."""
        meta = self._col.metadata or {}
        value = meta.get(MARKER_KEY)
        return str(value) if value else None

    def set_marker(self, token: str) -> None:
        """Record a clean-close token in the collection ("-": a writer is writing it)."""
        self._col.modify(metadata={MARKER_KEY: token or "-", **self._label})

    def refresh(self) -> None:
        """Look the collection up again (created empty if it is gone): after a failed write, a
        server may have been wiped or restarted on another folder while this process ran."""
        self._col = self._open_collection(self.name)

    def reset(self) -> None:
        """Empty this store's collection at once (drop and create it), for a manifest that
        starts from nothing: faster than deleting every id, and it needs no working graph."""
        self._client.delete_collection(self.name)
        self._col = self._open_collection(self.name)

    def probe(self, vectors: Sequence[np.ndarray]) -> str | None:
        """Look for each of these stored vectors; what is wrong, or None when all is well.

        Chroma answers ``count`` and ``get`` from its SQLite tables, but queries from its HNSW
        graph files, which a crash, a sync tool or a full disk can leave missing or damaged:
        then a query fails, or silently finds only the few vectors still in Chroma's log. A
        vector that is in the collection must be its own nearest neighbour (or tie with an
        identical one), so a handful of lookups tell a sound graph from a broken one. One miss
        is tolerated: the graph is approximate.
        """
        missed = 0
        for v in vectors:
            try:
                res = self._col.query(
                    query_embeddings=[np.asarray(v, dtype=np.float32)], n_results=1,
                    include=["distances"],
                )
            except VectorServerError:
                raise  # a server that does not answer is not a damaged collection
            except Exception as exc:
                return f"a query fails: {short_error(exc)}"
            dists = res["distances"][0] if res.get("distances") else []
            if not dists or float(dists[0]) > 1e-3:
                missed += 1
        if missed and missed >= max(1, (len(vectors) + 3) // 4):
            return f"{missed} of {len(vectors)} stored vectors are not found by a query"
        return None

    def _batches(self, n: int) -> Iterator[slice]:
        for start in range(0, n, self.batch_size):
            yield slice(start, min(n, start + self.batch_size))

    def upsert(
        self, ids: Sequence[str], vectors: np.ndarray, metadatas: Sequence[Metadata]
    ) -> None:
        if not ids:
            return
        if len(ids) != len(vectors) or len(ids) != len(metadatas):
            raise ValueError("ids, vectors and metadatas must have the same length")
        self.written = True
        for part in self._batches(len(ids)):
            self._col.upsert(
                ids=list(ids[part]),
                embeddings=np.asarray(vectors[part], dtype=np.float32),
                metadatas=[dict(m) for m in metadatas[part]],
            )

    def update_metadata(self, ids: Sequence[str], metadatas: Sequence[Metadata]) -> None:
        """Replace the metadata of existing ids (their vectors stay)."""
        ids = list(ids)
        self.written = self.written or bool(ids)
        for part in self._batches(len(ids)):
            self._col.update(ids=ids[part], metadatas=[dict(m) for m in metadatas[part]])

    def delete(self, ids: Sequence[str]) -> None:
        ids = list(ids)
        self.written = self.written or bool(ids)
        for part in self._batches(len(ids)):
            self._col.delete(ids=ids[part])

    def count(self) -> int:
        return int(self._col.count())

    def all_ids(self) -> set[str]:
        """Every id in the collection, in pages of :data:`ID_PAGE` (ids only: ~20 MB each).

        A ``get`` costs Chroma about 0.13 s plus 3.3 us per id it skips to reach its offset
        (measured at 400k), so pages of 1,000 made this 13.6 s at 100k chunks and, growing
        with the square of the size, about half an hour at a million (pages of 200k: ~12 s);
        one ``get`` of all 400k took 2.9 s."""
        out: set[str] = set()
        offset = 0
        page = ID_PAGE
        while True:
            got = self._col.get(limit=page, offset=offset, include=[])
            ids = got["ids"]
            out.update(ids)
            if len(ids) < page:
                return out
            offset += page

    def query(
        self,
        vector: np.ndarray,
        k: int,
        *,
        where: dict[str, Any] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[tuple[str, float]]:
        """Nearest chunks as (id, cosine similarity), best first."""
        return self.query_many([vector], k, where=where, ids=ids)[0]

    def query_many(
        self,
        vectors: Sequence[np.ndarray],
        k: int,
        *,
        where: dict[str, Any] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[list[tuple[str, float]]]:
        """:meth:`query` for each of ``vectors``, in one call: a call costs Chroma about half a
        millisecond before any search (a near-duplicate check asks for dozens of chunks'
        neighbours: 0.13 against 0.84 ms a query at 150 chunks, 1.6 against 10 ms at 10k).

        Chroma answers a ``k`` larger than the collection (or an empty one) with what it has,
        so the collection is not counted first: ``count()`` cost 20 ms a query at 96k chunks,
        twice the search itself (issue 55)."""
        empty: list[list[tuple[str, float]]] = [[] for _ in vectors]
        if not len(vectors) or k <= 0:
            return empty
        kwargs: dict[str, Any] = {
            "query_embeddings": np.asarray(np.stack(vectors), dtype=np.float32),
            "n_results": k,
            "include": ["distances"],
        }
        if where:
            kwargs["where"] = where
        if ids is not None:
            if not ids:
                return empty
            kwargs["ids"] = list(ids)
            kwargs["n_results"] = min(kwargs["n_results"], len(ids))
        res = self._col.query(**kwargs)
        if not res["ids"] or not res.get("distances"):
            return empty
        return [[(cid, 1.0 - float(d)) for cid, d in zip(f, ds, strict=False)]
                for f, ds in zip(res["ids"], res["distances"], strict=True)]

    def other_collections(self) -> dict[str, str]:
        """The collections of this index's other embedding spaces, as {space: collection}: on
        a server, only those with this index's key (other indexes' are never touched)."""
        out: dict[str, str] = {}
        for c in self._client.list_collections():
            name = str(getattr(c, "name", c))
            if name == self.name or not name.endswith(self._suffix):
                continue
            out[name[: len(name) - len(self._suffix)] if self._suffix else name] = name
        return dict(sorted(out.items()))

    def drop_collection(self, name: str) -> None:
        """Delete another space's collection and its files; never this store's own."""
        if name == self.name:
            raise ValueError("refusing to drop the open collection")
        self._client.delete_collection(name)

    def close(self) -> None:
        """Release this directory's Chroma system (files, threads) once no other client of the
        same directory in this process uses it. Chroma counts its clients per directory, so the
        other folders' indexes open in the same server are not affected."""
        self._col = None
        client, self._client = self._client, None
        client = getattr(client, "target", client)  # a server's client, unwrapped
        if client is not None:
            try:
                client.close()
            except Exception as exc:  # closing must never hide the error that led here
                log.debug("closing the Chroma client of %s: %s", self.url or self.path, exc)


def _forget_system(path: Path) -> None:
    """Drop Chroma's cached system for ``path`` after a failed open.

    Chroma caches one system per directory for the life of the process and keeps it even when
    starting it failed, so without this every later open of the same path (after the damaged
    folder was moved aside and a new one made) would get the broken one back.
    """
    systems = getattr(SharedSystemClient, "_identifier_to_system", {})
    system = systems.pop(str(path), None)
    getattr(SharedSystemClient, "_identifier_to_refcount", {}).pop(str(path), None)
    if system is not None:
        try:
            system.stop()
        except Exception as exc:
            log.debug("stopping the Chroma system of %s: %s", path, exc)


def short_error(exc: BaseException, limit: int = 240) -> str:
    """An exception as one short line (Chroma's errors can run to a page)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
