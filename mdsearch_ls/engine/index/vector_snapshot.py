"""The writer's copy of an index's vectors as files a reader maps instead of reading SQLite.

A search process that does not write the index (the CLI beside an editor, any CLI search of an
up-to-date index) ranks exactly from the manifest's vector cache; reading it meant a join of
every chunk with its vector blob, copied into a fresh matrix: 1.5 s and the whole matrix in the
process's own memory at 96k chunks. So the writer, when it closes, leaves the same rows in the
same order as three ``.npy`` files (vectors, ids, each row's note) and a small JSON naming them,
and a reader whose manifest is at the snapshot's generation maps them: the page cache holds
them once for every process, nothing is copied, and nothing is read that the query does not
touch.

The snapshot is only ever a copy. Its JSON records the manifest's generation and the time of
that generation's commit; a reader uses it only when both are the manifest's own, and falls
back to the manifest for anything else (no snapshot, an older one, a file gone or cut). The
arrays of each snapshot have names of their own and the JSON is replaced last, so a reader never
pairs one snapshot's ids with another's vectors; a reader still mapping an old one keeps it open
after it is replaced.

From :data:`ivf.MIN_ROWS` rows up, the snapshot is also an IVF index (:mod:`.ivf`): the rows are
written grouped by list (the order a reader's table then has) and the JSON names the centroids'
file, each list's first row and the lists a query probes, so every process that maps this
snapshot ranks by the same lists. The lists are part of the snapshot's identity: there is no
IVF file a reader could pair with another snapshot's rows.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.lib.format import open_memmap

from mdsearch_ls.engine.index import ivf

if TYPE_CHECKING:
    from mdsearch_ls.engine.index.manifest import Manifest

log = logging.getLogger(__name__)

FORMAT = 1

MEMO_SIZE = 6
"""Parsed JSON heads, mapped snapshots and their sorted ids kept per process (a few: the
current snapshot's and the one before). A server searches a new manifest state after every
save; reading the same snapshot again each time (its 2.3 MB JSON parsed three times, and a sort
of its 96k ids to find the rows a save left out) cost a search after a save about 50 ms at 96k
chunks. Keys hold each file's inode, size and mtime, so a replaced or cut file is read again."""

_MEMO: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_MEMO_LOCK = threading.Lock()
_PER_SNAPSHOT = ("mapped", "sorted")


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def _memo(key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
    """``make()``, or what it made for ``key`` before (an exception is not kept)."""
    with _MEMO_LOCK:
        if key in _MEMO:
            _MEMO.move_to_end(key)
            return _MEMO[key]
    value = make()
    with _MEMO_LOCK:
        _MEMO[key] = value
        if key[0] in _PER_SNAPSHOT:  # another snapshot of that index is not mapped on here
            # (a search still reading one keeps its own reference; its files, once replaced,
            # are freed when the last such search is done)
            for old in [k for k in _MEMO if k[0] in _PER_SNAPSHOT and k[1] == key[1]
                        and k[2] != key[2]]:
                del _MEMO[old]
        while len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    return value


def _json_path(manifest_path: Path) -> Path:
    return manifest_path.with_name(manifest_path.stem + ".vectors.json")


def identity(generation: int, last_update: str | None) -> str:
    """Which manifest state a snapshot copies: a generation number alone repeats after a
    rebuild, the commit time beside it does not."""
    return f"{generation}:{last_update or ''}"


def state(manifest: Manifest, generation: int) -> str:
    """The identity of a manifest at ``generation`` (its commit time read beside it)."""
    return identity(generation, manifest.get_meta("last_update"))


def patch_limit(rows: int) -> int:
    """How many changed chunks a reader patches a snapshot with (beyond it, the writer writes a
    new one when it closes): a patch reads those rows' vectors, a new snapshot every row."""
    return max(2_000, rows // 50)


def leave(manifest: Manifest, table: Any) -> None:
    """The writer, closing: write the snapshot of the manifest's state unless it is there or
    the last one and the journal make it (a few changed chunks: readers patch it), from
    ``table`` (the searcher's, when it is of this generation: no second read) or the manifest.
    A manifest in trouble is the next writer's to heal: nothing is written then."""
    try:
        gen = manifest.generation
        ident = state(manifest, gen)
        chunks = manifest.counts()[1]
        head = _head(manifest.path)  # (read once: 2 MB of JSON at 96k chunks)
        if head is not None and _complete(head):
            if head.get("identity") == ident:
                return
            base = _base(manifest, head)
            if base is not None and manifest.journal_since(*base) is not None:
                return  # a one-note save costs its rows, not a new file of every row
        seq = manifest.journal_position()
        if table is not None and table.generation == gen and hasattr(table, "matrix"):
            rows: Iterable[tuple[str, str, Any]] = (
                (table.id_at(i), table.path_at(i), table.matrix[i]) for i in range(len(table)))
        else:
            rows = manifest.vector_rows()
        if save(manifest.path, ident, chunks, rows,
                base={"lineage": manifest.get_meta("lineage"), "journal": seq}):
            manifest.prune_journal(seq)
    except (sqlite3.Error, KeyError, TypeError, ValueError) as exc:
        log.info("no vector snapshot written: %s", exc)


def _head(manifest_path: Path) -> dict[str, Any] | None:
    """The snapshot's JSON (shared: never changed by a caller), or None."""
    path = _json_path(manifest_path)

    def parse() -> dict[str, Any] | None:
        try:
            head = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return head if isinstance(head, dict) and head.get("format") == FORMAT else None

    try:
        key = ("head", str(path), _stamp(path))
    except OSError:
        return None
    return _memo(key, parse)


def _base(manifest: Manifest, head: dict[str, Any] | None) -> tuple[int, int] | None:
    """``(journal position, patch limit)`` of a snapshot this manifest's journal can patch
    (written from this file: the same lineage), or None."""
    if head is None or head.get("lineage") is None or "journal" not in head:
        return None
    if head["lineage"] != manifest.get_meta("lineage"):
        return None
    return int(head["journal"]), patch_limit(int(head["n"]))


def load_patched(manifest: Manifest) -> tuple[Any, np.ndarray, tuple[
        list[str], list[str], np.ndarray]] | None:
    """The last snapshot of this manifest (as :func:`load`), which of its rows changed since
    (a mask), and the changed chunks' current rows ``(ids, paths, matrix)``; None when there is
    no snapshot of this file's lineage, or the journal cannot say what changed since it, or
    more changed than :func:`patch_limit` lets a reader patch."""
    head = _head(manifest.path)
    try:
        base_at = _base(manifest, head)
        patch = None if base_at is None else manifest.patch_since(*base_at)
    except (sqlite3.Error, KeyError, TypeError, ValueError):
        return None  # (a manifest of a version before the journal: read in full)
    if patch is None or head is None:
        return None
    key = _files_key(manifest.path, head)
    base = None if key is None else load(manifest.path, str(head["identity"]))
    if base is None or key is None:
        return None
    changed, rows = patch
    ids = base[0]
    touched = np.array([c.encode() for c in changed if len(c.encode()) <= ids.dtype.itemsize],
                       dtype=ids.dtype)
    dead = np.zeros(len(ids), dtype=bool)
    if touched.size and len(ids):
        # the rows of the touched ids, through the snapshot's ids sorted once (np.isin sorted
        # all of them again for every new state)
        order, ordered = _memo(("sorted", *key), lambda: _sorted(ids))
        at = np.minimum(np.searchsorted(ordered, touched), len(ids) - 1)
        dead[order[at[ordered[at] == touched]]] = True
    width = base[2].shape[1] if base[2].size else (len(rows[0][2]) // 4 if rows else 0)
    matrix = (np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(-1, width)
              if rows else np.zeros((0, width), dtype=np.float32))
    return base, dead, ([r[0] for r in rows], [r[1] for r in rows], matrix)


def _sorted(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(ids, kind="stable")
    return order, ids[order]


def _files_key(manifest_path: Path, head: dict[str, Any]) -> tuple[Any, ...] | None:
    """A snapshot's identity and its files' stamps: a memo key that changes with any of them."""
    try:
        names = [head["matrix"], head["ids"], head["rows"]]
        if head.get("ivf") is not None:
            names.append(head["ivf"]["centroids"])
        return (str(manifest_path), str(head["identity"]),
                *(_stamp(manifest_path.parent / n) for n in names))
    except (OSError, KeyError, TypeError):
        return None


def load(manifest_path: Path, ident: str) -> tuple[np.ndarray, tuple[np.ndarray, list[str]],
                                                   np.ndarray, ivf.Ivf | None] | None:
    """``(ids, (path index, path names), matrix, lists)`` mapped from the snapshot of this
    manifest state (``lists`` None below :data:`ivf.MIN_ROWS` rows), or None when there is none
    for it or a file of it is cut. Shared between the searches of a process (:data:`MEMO_SIZE`):
    read only."""
    head = _head(manifest_path)
    if head is None or head.get("identity") != ident:
        return None
    key = _files_key(manifest_path, head)
    if key is None:
        return None
    return _memo(("mapped", *key), lambda: _mapped(manifest_path, head))


def _mapped(manifest_path: Path, head: dict[str, Any]) -> tuple[
        np.ndarray, tuple[np.ndarray, list[str]], np.ndarray, ivf.Ivf | None] | None:
    try:
        folder = manifest_path.parent
        matrix = np.load(folder / head["matrix"], mmap_mode="r")
        ids = np.load(folder / head["ids"], mmap_mode="r")
        rows = np.load(folder / head["rows"], mmap_mode="r")
        names = list(head["paths"])
        lists = _lists(folder, head.get("ivf"))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    n = int(head.get("n", -1))
    if not (0 <= n <= min(len(matrix), len(ids), len(rows))):
        return None
    if lists is not None and (int(lists.offsets[-1]) != n
                              or lists.centroids.shape[1:] != matrix.shape[1:]):
        return None
    if n == 0:
        return ids[:0], (rows[:0], names), np.zeros((0, 0), dtype=np.float32), None
    # the files are sized by the chunk count; the rows written are the first n (a view)
    return ids[:n], (rows[:n], names), matrix[:n], lists


def _lists(folder: Path, spec: Any) -> ivf.Ivf | None:
    if spec is None:
        return None
    centroids = np.load(folder / spec["centroids"])
    offsets = np.asarray(spec["offsets"], dtype=np.int64)
    if (centroids.ndim != 2 or len(offsets) != len(centroids) + 1 or offsets[0] != 0
            or np.any(np.diff(offsets) < 0)):
        raise ValueError("the IVF lists do not fit together")
    return ivf.Ivf(centroids.astype(np.float32, copy=False), offsets, int(spec["nprobe"]))


def _complete(head: dict[str, Any]) -> bool:
    """Whether a snapshot has the lists its size calls for (one left by a version without
    them, or with a higher threshold, is written again)."""
    try:
        return int(head.get("n", 0)) < ivf.MIN_ROWS or head.get("ivf") is not None
    except (ValueError, TypeError):
        return False


def save(manifest_path: Path, ident: str, capacity: int,
         rows: Iterable[tuple[str, str, np.ndarray | bytes]],
         base: dict[str, Any] | None = None) -> bool:
    """Write the snapshot of one manifest state from its ``(id, path, vector)`` rows, in the
    order a reader's table would have them (a writer, when it closes). The arrays are filled
    in place on disk, so a million rows cost their files, not their memory. ``capacity``
    bounds the rows (the chunk count); False when it could not be written (a full disk costs
    the next reader a slower load, nothing else)."""
    folder = manifest_path.parent
    stem = manifest_path.stem
    token = secrets.token_hex(6)
    files = {"matrix": f"{stem}.vectors-{token}.npy", "ids": f"{stem}.ids-{token}.npy",
             "rows": f"{stem}.rows-{token}.npy"}
    names: dict[str, int] = {}
    n = 0
    try:
        matrix = ids = where = None
        for cid, path, vector in rows:
            vec = np.frombuffer(vector, dtype=np.float32) if isinstance(vector, bytes) else vector
            if matrix is None:
                shape = (max(capacity, 1), vec.size)
                matrix = open_memmap(folder / files["matrix"], "w+", np.float32, shape)
                ids = open_memmap(folder / files["ids"], "w+", "S32", (shape[0],))
                where = open_memmap(folder / files["rows"], "w+", np.int32, (shape[0],))
            if n == len(matrix) or len(cid) > 32:  # more rows than counted: not a copy
                raise ValueError("the manifest changed while it was copied")
            matrix[n], ids[n], where[n] = vec, cid.encode(), names.setdefault(path, len(names))
            n += 1
        for arr in (matrix, ids, where):
            if arr is not None:
                arr.flush()
        lists = None
        if matrix is not None and n >= ivf.MIN_ROWS:
            assert ids is not None and where is not None
            files, lists = _grouped(folder, stem, files, matrix, ids, where, n)
        del matrix, ids, where
        head = {"format": FORMAT, "identity": ident, "n": n, "paths": list(names), **files,
                **(base or {})}
        if lists is not None:
            head["ivf"] = lists
        tmp = folder / f"{stem}.vectors-{token}.json.tmp"
        tmp.write_text(json.dumps(head), encoding="utf-8")
        os.replace(tmp, _json_path(manifest_path))
    except (OSError, ValueError) as exc:
        log.info("no vector snapshot written: %s", exc)
        for name in files.values():
            with contextlib.suppress(OSError):
                (folder / name).unlink()
        return False
    for old in (*folder.glob(f"{stem}.vectors-*.npy"), *folder.glob(f"{stem}.ids-*.npy"),
                *folder.glob(f"{stem}.rows-*.npy"), *folder.glob(f"{stem}.centroids-*.npy")):
        if old.name not in {*files.values(), (lists or {}).get("centroids")}:
            with contextlib.suppress(OSError):
                old.unlink()
    return True


def _grouped(folder: Path, stem: str, files: dict[str, str], matrix: np.ndarray,
             ids: np.ndarray, where: np.ndarray, n: int) -> tuple[dict[str, str], dict[str, Any]]:
    """The rows just written, clustered and written again grouped by list (new files; the
    first ones go), and the JSON's description of the lists. Memory stays at the sample and a
    block of rows: the matrix is read and written through its mapping."""
    nlist = ivf.list_count(n)
    centroids = ivf.train(matrix[:n], nlist)
    order, offsets = ivf.layout(ivf.assign(matrix[:n], centroids), nlist)
    token = secrets.token_hex(6)
    grouped = {"matrix": f"{stem}.vectors-{token}.npy", "ids": f"{stem}.ids-{token}.npy",
               "rows": f"{stem}.rows-{token}.npy", "centroids": f"{stem}.centroids-{token}.npy"}
    try:
        for key, src in (("matrix", matrix), ("ids", ids), ("rows", where)):
            out = open_memmap(folder / grouped[key], "w+", src.dtype, (n, *src.shape[1:]))
            for start in range(0, n, ivf.BLOCK):
                out[start:start + ivf.BLOCK] = src[order[start:start + ivf.BLOCK]]
            out.flush()
            del out
        np.save(folder / grouped["centroids"], centroids)
    except BaseException:
        for name in grouped.values():
            with contextlib.suppress(OSError):
                (folder / name).unlink()
        raise
    for name in files.values():
        with contextlib.suppress(OSError):
            (folder / name).unlink()
    spec = {"centroids": grouped.pop("centroids"), "offsets": offsets.tolist(),
            "nprobe": ivf.probe_count(nlist)}
    return grouped, spec


def current(manifest_path: Path) -> str | None:
    """The identity of the snapshot on disk, if any."""
    head = _head(manifest_path)
    return None if head is None or "identity" not in head else str(head["identity"])
