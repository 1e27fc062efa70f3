"""The vector store: a Chroma collection on disk, written in batches, never embedding by itself.

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

import numpy as np

from mdsearch_ls.engine.records import FileRecord, Location

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
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("CHROMA_TELEMETRY", "False")
    for name in ("chromadb", "chromadb.telemetry", "posthog"):
        logging.getLogger(name).setLevel(logging.ERROR)


class ChromaStore:
    """One collection of one embedding space in a persistent Chroma directory."""

    def __init__(self, path: Path, collection: str, *, batch_size: int = 1000) -> None:
        _quiet_chroma()
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        try:
            self._client = chromadb.PersistentClient(
                path=str(path),
                settings=ChromaSettings(anonymized_telemetry=False, allow_reset=False),
            )
            self._col = self._client.get_or_create_collection(
                name=collection,
                metadata={"hnsw:space": "cosine"},
                embedding_function=None,
            )
        except Exception as exc:
            raise StoreError(
                f"could not open the vector index in {path}: {exc}. The index is a cache: "
                f"delete that folder (or run 'mdsearch index --rebuild') to rebuild it from "
                f"the notes."
            ) from exc
        self.max_batch = int(self._client.get_max_batch_size())
        self.batch_size = max(1, min(batch_size, self.max_batch))
        self.name = collection

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
        for part in self._batches(len(ids)):
            self._col.upsert(
                ids=list(ids[part]),
                embeddings=np.asarray(vectors[part], dtype=np.float32),
                metadatas=[dict(m) for m in metadatas[part]],
            )

    def delete(self, ids: Sequence[str]) -> None:
        ids = list(ids)
        for part in self._batches(len(ids)):
            self._col.delete(ids=ids[part])

    def count(self) -> int:
        return int(self._col.count())

    def all_ids(self) -> set[str]:
        """Every id in the collection, paged so a large index never hits the batch limit."""
        out: set[str] = set()
        offset = 0
        page = max(self.batch_size, 1000)
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
        total = self.count()
        if total == 0 or k <= 0:
            return []
        kwargs: dict[str, Any] = {
            "query_embeddings": [np.asarray(vector, dtype=np.float32)],
            "n_results": min(k, total),
            "include": ["distances"],
        }
        if where:
            kwargs["where"] = where
        if ids is not None:
            if not ids:
                return []
            kwargs["ids"] = list(ids)
            kwargs["n_results"] = min(kwargs["n_results"], len(ids))
        res = self._col.query(**kwargs)
        found = res["ids"][0] if res["ids"] else []
        dists = res["distances"][0] if res.get("distances") else []
        return [(cid, 1.0 - float(d)) for cid, d in zip(found, dists, strict=False)]

    def other_collections(self) -> list[str]:
        """Names of the collections of other embedding spaces in the same Chroma directory."""
        names = (getattr(c, "name", c) for c in self._client.list_collections())
        return sorted(str(n) for n in names if n != self.name)

    def drop_collection(self, name: str) -> None:
        """Delete another space's collection and its files; never this store's own."""
        if name == self.name:
            raise ValueError("refusing to drop the open collection")
        self._client.delete_collection(name)

    def close(self) -> None:
        """Drop our references. Chroma's process-wide client cache is left alone on purpose:
        clearing it would break the other folders' indexes open in the same server."""
        self._col = None  # type: ignore[assignment]
