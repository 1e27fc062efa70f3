"""FTS5's ``bm25()`` row by row, outside FTS5: one phrase's rows read with what scores them, and
carried across a write of this process's exactly (engine/index/phrase_scores.py keeps them).

A phrase's term in a row's score is ``idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl))``
(fts5_aux.c): ``f`` the row's column-weighted count of the phrase, ``D`` its length in tokens,
``idf`` from the rows the phrase matches of all, ``avgdl`` the table's mean length. A write moves
only ``idf`` and ``avgdl`` for a row it left alone, so a row that keeps its ``f`` and ``D`` can be
scored again in numpy, in the order C evaluates it, with the C library's ``log``: the same double
(IEEE operations round the same way). ``D`` is FTS5's own docsize record; ``f`` is solved from
the row's score, and a phrase whose every row does not come back bit for bit is not carried.

A carry drops the rows the writes since removed, asks FTS5 for the phrase among the inserted
rowids only (a range query per run: about a millisecond where reading "file" whole costs 30-50
at 96k chunks), scores the rest again, and asks FTS5 one unchanged row beside them as a check:
unequal (a platform whose compiler fuses a multiply-add, a count gone wrong) and the phrase is
read whole, as before: it costs speed, never a different ranking.
"""

from __future__ import annotations

import math
import sqlite3
from typing import NamedTuple

import numpy as np

K1, B = 1.2, 0.75
"""FTS5's bm25() constants (fts5_aux.c)."""

CARRY_RUNS = 8
"""Rowid runs a carry asks FTS5 for, at most (one range query each): a save inserts one run;
a write of many scattered notes drops the phrase instead (read whole)."""

WIDE = 65535
"""``f`` and ``D`` are kept as 16-bit counts; a phrase with a row past that is not carried."""

BATCH = 8192
"""Docsize rows decoded at a time."""

_READ = ("SELECT f.rowid, bm25(chunks_fts, ?, ?), d.sz FROM chunks_fts f "
         "JOIN chunks_fts_docsize d ON d.id = f.rowid WHERE chunks_fts MATCH ?")


class Rows(NamedTuple):
    """One phrase's rows at one index state: each row's ``-bm25``, and the ``f`` and ``D`` that
    carry them across a write (None: kept for this state only)."""

    rowids: np.ndarray
    scores: np.ndarray
    freq: np.ndarray | None
    length: np.ndarray | None

    @property
    def size(self) -> int:
        return int(self.rowids.size)


def read(conn: sqlite3.Connection, match: str, weights: tuple[float, float],
         lengths_by_rowid: np.ndarray | None = None) -> Rows:
    """Every row ``match`` matches, with its score (bm25() is negative: better is lower), and,
    given every row's length (:func:`all_lengths`), each row's ``f`` and ``D`` when they give
    its score back exactly."""
    got = conn.execute("SELECT rowid, bm25(chunks_fts, ?, ?) FROM chunks_fts "
                       "WHERE chunks_fts MATCH ?", (*weights, match)).fetchall()
    n = len(got)
    rowids = np.fromiter((r[0] for r in got), np.int64, n)
    scores = np.fromiter((-r[1] for r in got), np.float64, n)
    freq = length = None
    if lengths_by_rowid is not None and n and int(rowids.max()) < lengths_by_rowid.size:
        totals = table_totals(conn)
        length = lengths_by_rowid[rowids]
        if totals is not None:
            freq = solve_freq(scores, length, idf(totals[0], n), avgdl(totals), weights)
    return Rows(_narrow(rowids), scores, freq, None if freq is None else length)


def all_lengths(conn: sqlite3.Connection) -> np.ndarray | None:
    """Every row's length in tokens, by rowid (0 where there is no row); None where rowids are
    too far apart for one slot each (an index rewritten many times over)."""
    top = conn.execute("SELECT max(id), count(*) FROM chunks_fts_docsize").fetchone()
    if not top or top[0] is None or top[0] > 4 * top[1] + 1_000_000:
        return None
    out: np.ndarray | None = np.zeros(int(top[0]) + 1, np.uint16)
    cursor = conn.execute("SELECT id, sz FROM chunks_fts_docsize")
    while out is not None and (rows := cursor.fetchmany(BATCH)):
        out = _put_lengths(out, rows)  # a batch at a time: a long-running process's heap
        # keeps what a whole table of row objects once took (96k rows: ~12 MB)
    return out


def patch_lengths(conn: sqlite3.Connection, lengths_by_rowid: np.ndarray,
                  inserted: np.ndarray) -> np.ndarray | None:
    """``lengths_by_rowid`` with the rows ``inserted`` since read again (a copy: a search may be
    reading the old one); None when that would take too many queries."""
    spans = runs(inserted)
    if len(spans) > 8 * CARRY_RUNS:
        return None
    rows: list[tuple[int, bytes]] = []
    for lo, hi in spans:
        rows += conn.execute("SELECT id, sz FROM chunks_fts_docsize WHERE id BETWEEN ? AND ?",
                             (lo, hi)).fetchall()
    top = max([lengths_by_rowid.size - 1, *(r[0] for r in rows)])
    out = np.zeros(top + 1, np.uint16)
    out[:lengths_by_rowid.size] = lengths_by_rowid
    return _put_lengths(out, rows)


def _put_lengths(out: np.ndarray, rows: list[tuple[int, bytes]]) -> np.ndarray | None:
    if not rows:
        return out
    decoded = lengths([r[1] for r in rows])
    if decoded is None or (decoded.size and int(decoded.max()) > WIDE):
        return None
    out[np.fromiter((r[0] for r in rows), np.int64, len(rows))] = decoded
    return out


def carry(conn: sqlite3.Connection, match: str, weights: tuple[float, float], old: Rows,
          removed: np.ndarray, inserted: np.ndarray) -> Rows | None:
    """``old``'s phrase in ``conn``'s state, given the rowids removed (or replaced) and inserted
    since ``old`` was read; None when it cannot be shown exact, or costs too many queries."""
    if old.freq is None or old.length is None:
        return None
    live = ~np.isin(old.rowids, removed) if removed.size else np.ones(old.size, bool)
    rowids, freq, length = old.rowids[live], old.freq[live], old.length[live]
    asked = runs(inserted)
    probe = -1
    if rowids.size:  # the kept row nearest the writes, asked of FTS5 with them as a check
        near = asked[0][0] if asked else 0
        probe = int(np.argmin(np.abs(rowids.astype(np.int64) - near)))
        at = int(rowids[probe])
        # In the first run's query (each query counts the phrase's rows again for its idf):
        # no other row of the phrase lies between the nearest kept row and the run.
        asked[:1] = [(min(at, asked[0][0]), max(at, asked[0][1])) if asked else (at, at)]
    totals = table_totals(conn)
    if len(asked) > CARRY_RUNS or totals is None:
        return None
    found: dict[int, tuple[int, float, bytes]] = {}
    for lo, hi in asked:
        found.update((r[0], r) for r in conn.execute(_READ + " AND f.rowid BETWEEN ? AND ?",
                                                     (*weights, match, lo, hi)))
    got = list(found.values())
    fresh = set(inserted.tolist())
    new = [r for r in got if r[0] in fresh]
    checks = [r for r in got if r[0] not in fresh]
    the_idf, the_avgdl = idf(totals[0], int(rowids.size) + len(new)), avgdl(totals)
    scores = bm25(the_idf, freq, length, the_avgdl)
    if rowids.size and [(r[0], -r[1]) for r in checks] != [(int(rowids[probe]),
                                                            float(scores[probe]))]:
        return None  # not FTS5's double (or a row not where it was): read the phrase whole
    new_ids = np.fromiter((r[0] for r in new), np.int64, len(new))
    new_scores = np.fromiter((-r[1] for r in new), np.float64, len(new))
    new_length = lengths([r[2] for r in new])
    new_freq = None if new_length is None else solve_freq(new_scores, new_length, the_idf,
                                                          the_avgdl, weights)
    ids = _narrow(np.concatenate([rowids.astype(np.int64), new_ids]))
    all_scores = np.concatenate([scores, new_scores])
    if new_freq is None or new_length is None:
        return Rows(ids, all_scores, None, None)
    return Rows(ids, all_scores, np.concatenate([freq, new_freq]),
                np.concatenate([length, new_length.astype(np.uint16)]))


def runs(rowids: np.ndarray) -> list[tuple[int, int]]:
    """Sorted rowids as ``(first, last)`` runs of consecutive ones."""
    if not rowids.size:
        return []
    cuts = np.flatnonzero(np.diff(rowids) > 1) + 1
    return [(int(g[0]), int(g[-1])) for g in np.split(rowids, cuts)]


def bm25(the_idf: float, freq: np.ndarray, length: np.ndarray, the_avgdl: float) -> np.ndarray:
    """FTS5's per-row term (fts5Bm25Function), evaluated in C's order."""
    f = freq.astype(np.float64)
    d = length.astype(np.float64)
    return the_idf * ((f * (K1 + 1.0)) / (f + K1 * ((1 - B) + (B * d) / the_avgdl)))


def idf(rows: int, hits: int) -> float:
    """FTS5's idf: a phrase in over half the rows weighs 1e-6, not less than nothing."""
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else 1e-6


def avgdl(totals: tuple[int, int]) -> float:
    return float(totals[1]) / float(totals[0])


def solve_freq(scores: np.ndarray, length: np.ndarray, the_idf: float, the_avgdl: float,
               weights: tuple[float, float]) -> np.ndarray | None:
    """Each row's column-weighted count, solved from its score: a whole number with whole
    weights (so rounding finds it), kept only if every row's score comes back bit for bit."""
    if not all(float(w).is_integer() and 0 <= w <= 255 for w in weights):
        return None
    if length.size and int(length.max()) > WIDE:
        return None
    c = K1 * ((1 - B) + (B * length.astype(np.float64)) / the_avgdl)
    r = scores / the_idf
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        freq = np.rint(r * c / ((K1 + 1.0) - r))
    if freq.size and not (np.isfinite(freq).all() and freq.min() >= 0 and freq.max() <= WIDE):
        return None
    if not np.array_equal(bm25(the_idf, freq, length, the_avgdl), scores):
        return None
    return freq.astype(np.uint16)


def table_totals(conn: sqlite3.Connection) -> tuple[int, int] | None:
    """``(rows, tokens)`` of the table as bm25() reads them: FTS5's averages record (rowid 1 of
    its data table), the row count then each column's token total."""
    row = conn.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()
    values = varints(bytes(row[0])) if row is not None and row[0] is not None else []
    if len(values) < 2 or values[0] <= 0:
        return None
    return values[0], sum(values[1:])


def varints(blob: bytes) -> list[int]:
    """SQLite's varints: 7 bits a byte, high bit set while more follow; a ninth byte has 8."""
    out: list[int] = []
    value = width = 0
    for byte in blob:
        width += 1
        if width == 9:
            out.append((value << 8) | byte)
            value = width = 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            out.append((value << 7) | byte)
            value = width = 0
    return out


def lengths(blobs: list[bytes | None]) -> np.ndarray | None:
    """Each row's length in tokens (its columns' sizes summed) from FTS5's docsize records, one
    varint a column, decoded in numpy; None for a record it cannot read that way."""
    n = len(blobs)
    if not n:
        return np.zeros(0, np.int64)
    if any(b is None or not len(b) for b in blobs):
        return None
    sizes = np.fromiter(map(len, blobs), np.int64, n)  # type: ignore[arg-type]
    buf = np.frombuffer(b"".join(blobs), np.uint8).astype(np.int64)  # type: ignore[arg-type]
    row_end = np.cumsum(sizes)
    ends = np.flatnonzero(buf < 0x80)
    if not (buf[row_end - 1] < 0x80).all():
        return None
    starts = np.concatenate(([0], ends[:-1] + 1))
    width = ends - starts + 1
    if int(width.max()) > 4:  # (2**28 tokens in a row: not a section)
        return None
    value = np.zeros(ends.size, np.int64)
    for j in range(int(width.max())):
        has = width > j
        value[has] = (value[has] << 7) | (buf[starts[has] + j] & 0x7F)
    owner = np.searchsorted(row_end, ends, side="right")
    return np.bincount(owner, weights=value, minlength=n).astype(np.int64)


def _narrow(rowids: np.ndarray) -> np.ndarray:
    return rowids.astype(np.int32) if rowids.size and int(rowids.max()) < 2**31 else rowids
