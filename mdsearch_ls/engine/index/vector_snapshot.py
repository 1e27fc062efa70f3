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
import itertools
import json
import logging
import os
import secrets
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

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


def leave(manifest: Manifest, table: Any) -> bool:
    """The writer, closing: write the snapshot of the manifest's state (True) unless it is
    there or the last one and the journal make it (a few changed chunks: readers patch it), from
    ``table`` (the searcher's, when it is of this generation: no second read) or the manifest.
    A manifest in trouble is the next writer's to heal: nothing is written then."""
    try:
        gen = manifest.generation
        ident = state(manifest, gen)
        chunks = manifest.counts()[1]
        head = _head(manifest.path)  # (read once: 2 MB of JSON at 96k chunks)
        if head is not None and _complete(head):
            if head.get("identity") == ident:
                return False
            base = _base(manifest, head)
            if base is not None and manifest.journal_since(*base) is not None:
                return False  # a one-note save costs its rows, not a new file of every row
        seq = manifest.journal_position()
        if table is not None and table.generation == gen and hasattr(table, "matrix"):
            rows: Iterable[tuple[str, str, Any]] = (
                (table.id_at(i), table.path_at(i), table.matrix[i]) for i in range(len(table)))
        else:
            rows = manifest.vector_rows()
        if save(manifest.path, ident, chunks, rows,
                base={"lineage": manifest.get_meta("lineage"), "journal": seq}):
            manifest.prune_journal(seq)
            return True
    except (sqlite3.Error, KeyError, TypeError, ValueError) as exc:
        log.info("no vector snapshot written: %s", exc)
    return False


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
    order a reader's table would have them (a writer, when it closes). The rows go to the files
    a block at a time, so a million rows cost their files, not the writer's memory (filled
    through a mapping, every page written stayed in the writer's RSS: 0.65 GB more at 400k
    chunks, twice the matrix with the IVF copy). ``capacity`` bounds the rows (the chunk
    count); False when it could not be written (a full disk costs the next reader a slower
    load, nothing else)."""
    folder = manifest_path.parent
    stem = manifest_path.stem
    token = secrets.token_hex(6)
    files = {"matrix": f"{stem}.vectors-{token}.npy", "ids": f"{stem}.ids-{token}.npy",
             "rows": f"{stem}.rows-{token}.npy"}
    names: dict[str, int] = {}
    n = 0
    out: _Arrays | None = None
    try:
        for cid, path, vector in rows:
            vec = np.frombuffer(vector, dtype=np.float32) if isinstance(vector, bytes) else vector
            if out is None:
                out = _Arrays(folder, files, max(capacity, 1), vec.size)
            if n == out.capacity or len(cid) > 32:  # more rows than counted: not a copy
                raise ValueError("the manifest changed while it was copied")
            out.add(vec, cid.encode(), names.setdefault(path, len(names)))
            n += 1
        if out is not None:
            out.close()
        lists = None
        if n >= ivf.MIN_ROWS:
            files, lists = _grouped(folder, stem, files, n)
        head = {"format": FORMAT, "identity": ident, "n": n, "paths": list(names), **files,
                **(base or {})}
        if lists is not None:
            head["ivf"] = lists
        tmp = folder / f"{stem}.vectors-{token}.json.tmp"
        tmp.write_text(json.dumps(head), encoding="utf-8")
        os.replace(tmp, _json_path(manifest_path))
    except (OSError, ValueError) as exc:
        log.info("no vector snapshot written: %s", exc)
        if out is not None:
            out.drop()  # (closed already when the failure came after)
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


WRITE_ROWS = 4096
"""Rows a snapshot file takes per write (6 MB of vectors)."""


def _npy_file(path: Path, dtype: np.dtype[Any], rows: int, width: int | None) -> BinaryIO:
    """A new ``.npy`` file open for writing, its header (``rows`` x ``width``) written."""
    file = open(path, "wb")  # noqa: SIM115 -- the caller closes it
    np.lib.format.write_array_header_1_0(file, {
        "descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
        "shape": (rows,) if width is None else (rows, width)})
    return file


class _Npy:
    """One ``.npy`` file written front to back, a block of rows at a time, sized for
    ``capacity`` rows (the rows not given are zeros)."""

    def __init__(self, path: Path, dtype: Any, capacity: int, width: int | None) -> None:
        self.dtype = np.dtype(dtype)
        self.block = np.zeros((WRITE_ROWS,) if width is None else (WRITE_ROWS, width),
                              self.dtype)
        self.used = self.written = 0
        self.capacity = capacity
        self.file = _npy_file(path, self.dtype, capacity, width)

    def add(self, row: Any) -> None:
        self.block[self.used] = row
        self.used += 1
        if self.used == WRITE_ROWS:
            self._flush()

    def _flush(self) -> None:
        self.file.write(self.block[:self.used].tobytes())
        self.written += self.used
        self.used = 0

    def close(self) -> None:
        try:
            self._flush()
            self.block[:] = 0
            while self.written < self.capacity:
                self.used = min(WRITE_ROWS, self.capacity - self.written)
                self._flush()
            self.file.flush()
            os.fsync(self.file.fileno())
        finally:
            self.file.close()


class _Arrays:
    """The three files of a snapshot (vectors, ids, each row's note), filled row by row."""

    def __init__(self, folder: Path, files: dict[str, str], capacity: int, dim: int) -> None:
        self.capacity = capacity
        self.parts = [_Npy(folder / files["matrix"], np.float32, capacity, dim)]
        self.parts += [_Npy(folder / files["ids"], "S32", capacity, None),
                       _Npy(folder / files["rows"], np.int32, capacity, None)]

    def add(self, vec: np.ndarray, cid: bytes, note: int) -> None:
        for part, value in zip(self.parts, (vec, cid, note), strict=True):
            part.add(value)

    def close(self) -> None:
        for part in self.parts:
            part.close()

    def drop(self) -> None:
        """Close the files unfinished (the caller deletes them)."""
        for part in self.parts:
            part.file.close()


class _Rows:
    """The first ``n`` rows of a ``.npy`` file, read with plain reads, never through a mapping:
    every page a mapping touches (and the neighbours the kernel maps with it on each fault)
    counts in this process's RSS until it is unmapped, so reading a block of scattered rows
    through one mapped the whole file (the IVF's sample, its regrouped copy: 0.4 GB at 200k
    rows)."""

    def __init__(self, path: Path, n: int) -> None:
        self.path, self.n = path, n
        with path.open("rb") as f:
            version = np.lib.format.read_magic(f)
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            shape, _fortran, self.dtype = read(f)
            self.offset = f.tell()
        self.width: int | None = shape[1] if len(shape) == 2 else None
        self.row_bytes = self.dtype.itemsize * (self.width or 1)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key: slice | np.ndarray) -> np.ndarray:
        """A slice is one read; an array of row numbers one read a row (the IVF's sample)."""
        if isinstance(key, slice):
            start, stop, _ = key.indices(self.n)
            flat = np.fromfile(self.path, self.dtype, max(stop - start, 0) * (self.width or 1),
                               offset=self.offset + start * self.row_bytes)
        else:
            flat = np.empty(len(key) * (self.width or 1), self.dtype)
            into, size = memoryview(flat).cast("B"), self.row_bytes
            fd = os.open(self.path, os.O_RDONLY)
            try:
                for j, i in enumerate(key.tolist()):
                    os.preadv(fd, [into[j * size:(j + 1) * size]], self.offset + i * size)
            finally:
                os.close(fd)
        return flat if self.width is None else flat.reshape(-1, self.width)


def _regroup(src: _Rows, dest: Path, order: np.ndarray) -> None:
    """``src``'s rows in ``order`` as a new ``.npy`` file, read a block at a time in the
    source's order and written where each row goes: a block's rows of one list go to
    consecutive places (the order is stable), so each is one write."""
    place = np.empty(src.n, np.int64)
    place[order] = np.arange(src.n)
    with _npy_file(dest, src.dtype, src.n, src.width) as out:
        out.flush()
        offset = out.tell()
        out.truncate(offset + src.n * src.row_bytes)
        fd = out.fileno()
        for start in range(0, src.n, ivf.BLOCK):
            block = src[start:start + ivf.BLOCK]
            where = place[start:start + len(block)]
            by = np.argsort(where, kind="stable")
            where, block = where[by], block[by]
            cuts = [0, *(np.flatnonzero(np.diff(where) != 1) + 1).tolist(), len(where)]
            for lo, hi in itertools.pairwise(cuts):
                os.pwrite(fd, block[lo:hi].tobytes(), offset + int(where[lo]) * src.row_bytes)
        os.fsync(fd)


def _grouped(folder: Path, stem: str, files: dict[str, str],
             n: int) -> tuple[dict[str, str], dict[str, Any]]:
    """The rows just written, clustered and written again grouped by list (new files; the
    first ones go), and the JSON's description of the lists. Memory stays at the sample and a
    block of rows: the first files are read a block at a time (:class:`_Rows`)."""
    nlist = ivf.list_count(n)
    matrix = _Rows(folder / files["matrix"], n)
    centroids = ivf.train(matrix, nlist)
    order, offsets = ivf.layout(ivf.assign(matrix, centroids), nlist)
    token = secrets.token_hex(6)
    grouped = {"matrix": f"{stem}.vectors-{token}.npy", "ids": f"{stem}.ids-{token}.npy",
               "rows": f"{stem}.rows-{token}.npy", "centroids": f"{stem}.centroids-{token}.npy"}
    try:
        for key in ("matrix", "ids", "rows"):
            _regroup(_Rows(folder / files[key], n), folder / grouped[key], order)
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
