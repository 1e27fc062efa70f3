"""BM25 of a typed query summed from its phrases, the common phrases' scores kept in memory.

FTS5's ``bm25()`` is a sum over the phrases of the query: each adds, for a row it matches,
``idf * f * (k1 + 1) / (f + k1 * (1 - b + b * D / avgdl))``, with its own idf (from the rows it
matches), ``f`` its column-weighted count in the row, ``D`` the row's length and ``avgdl`` the
table's. So the score of an OR of phrases is the sum of each phrase's score searched alone. A
typed question is such an OR, and its common words are what makes FTS5 slow: at 96k chunks "files"
matches 39k rows, and FTS5 scores every row any word matches (50-60 ms for a typical question,
most of a hybrid search). A long-running process (a language or MCP server, the background process)
keeps each common phrase's per-row scores for the index state they were read at, and asks FTS5
per search only for the other phrases, each alone; the sums and the first ``limit`` rows (best
first, then by rowid, FTS5's order) are taken in numpy.

The sums are FTS5's to the last bit: each phrase's score is the same double, and they are added in
the query's order, as FTS5 adds them (a phrase a row lacks adds 0.0 there), so which of the two
answered never shows. Reading a common phrase alone costs more than scoring it with the others
(80 ms against 51 for a typical question at 96k, everything read alone), so a process that
searches once (the CLI) keeps nothing and asks FTS5 the whole query, and so does a search whose
rows lie mostly in phrases not kept (a start, a write by another process, or a query of rare
words only); its common phrases are then read on a thread of their own, for the searches after it.

**Keyed by tokens, warmed from the vocabulary.** A phrase is kept under the tokens FTS5 makes of
it (engine/index/fts_tokens.py: "shows" and "show" are one key), and a server (``warm``) reads the
index's common words on the thread once it first searches: the words a question had not met yet
were what a server still read per search (10-45 ms of a new question at 96k chunks).

**Across this process's own writes** (a server's saves) the kept phrases are carried, not
read again: the manifest tells which rowids each write removed and inserted (:meth:`wrote`), and
the first search after it that needs a kept phrase has it scored again for the new idf and
``avgdl`` from each row's count and length, FTS5's double checked (engine/index/bm25_rows.py).
"""

from __future__ import annotations

import contextlib
import os
import queue
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence

import numpy as np

from mdsearch_ls.engine.embedding.onnx_backend import release_free_memory
from mdsearch_ls.engine.index import bm25_rows
from mdsearch_ls.engine.index.bm25_rows import Rows
from mdsearch_ls.engine.index.fts_tokens import Tokens, word_counts

COMMON_ROWS = 500
"""A phrase matching at least this many rows is kept; a rarer one costs less to read again."""

BUDGET = 4_000_000
"""Rows kept over all phrases (8 bytes each in a writer, which keeps counts and lengths to carry
them; 12 in a reader, which keeps scores: 32-48 MB at most); the least recently used phrase
goes first. At 96k chunks the words of 500+ rows but stopwords hold 2.5M rows (all kept by the
warm), the phrases of 500+ rows of all 365 nl2bash questions 3.1M. Past 100k rows, see PER_ROW."""

PER_ROW = 40
"""A warm grows the budget to this many rows a row of the table (at most 320-480 MB at a million
chunks). There the words of 500+ rows hold 17.2M rows; kept, a server answered in 43-76 ms p50,
not 286-452, for 81-92 MB more (million_bench.py --steps queries, December 2026)."""

COLD_SHARE = 3
"""Ask FTS5 the whole query when over 1/COLD_SHARE of the rows the phrases match are in phrases
not kept: reading a phrase alone costs 2-2.5x its share of the whole query (four nl2bash
questions at 96k chunks, December 2026: the rows come to Python one by one), so reading the rest
alone pays only below about a third (a query of rare words only, too, goes to FTS5 whole: few
rows either way). Either way the common ones end up kept: read here, or later on the thread."""

WRITES_KEPT = 64
"""Writes remembered (the rowids each removed and inserted): a kept phrase is carried across at
most this many of this process's writes since it was last needed."""

WARM_SHARE = 0.75
"""The share of the budget the vocabulary warm fills, the commonest words first, so that what
searches need later (pairs, rarer words) has room without pushing those out. At 96k chunks,
new questions' keyword lists took 10 ms (p50) with every common word kept (2.5M rows), 14 with
the commonest 1.8M, 19 with none (40 nl2bash questions after 100 others, timed in process)."""

WARM_AGAIN_S = 300.0
"""The vocabulary is read again at most this often (a reader loses all it keeps at each save of
another process: 6 s of reading at 96k chunks after each would keep a core busy)."""

_Key = tuple[str, float, float]  # (the phrase's tokens, title weight, body weight)
_Job = tuple[Callable[[], sqlite3.Connection], object, list[tuple[_Key, str]] | tuple[float, float]]
"""What the thread reads: each key with a phrase that matches it, or the vocabulary (weights)."""
_Write = tuple[object, np.ndarray, np.ndarray]

_UNSCORED = np.zeros(0, np.float64)  # a phrase kept as counts and lengths (PhraseScores._scores)


def _state_of(conn: sqlite3.Connection) -> object:
    return conn.execute("SELECT (SELECT value FROM meta WHERE key = 'lineage'), "
                        "(SELECT value FROM meta WHERE key = 'generation')").fetchone()


class PhraseScores:
    """Per-row scores of common phrases for one index state (lineage and generation)."""

    def __init__(self, budget: int = BUDGET, common_rows: int = COMMON_ROWS,
                 carry: bool = True, warm: Collection[str] | None = None) -> None:
        """``carry``: this process writes the index, so what it keeps can be carried across
        its writes (a reader's never can: it reads no row lengths for it). ``warm``: read the
        commonest words once searches begin, at the first search's weights, except these (the
        words a query leaves out); None: only what searches ask for."""
        self.budget = budget
        self.common_rows = common_rows
        self.carry = carry
        self.warm = None if warm is None else frozenset(warm)
        self._warmed_at: tuple[object, float] = (None, -WARM_AGAIN_S)
        self._tokens = Tokens()
        self._state: object = None
        self._kept: OrderedDict[_Key, Rows] = OrderedDict()
        self._before: dict[_Key, tuple[object, Rows]] = {}
        """Carryable phrases kept at an earlier state, not yet needed at this one."""
        self._writes: OrderedDict[object, _Write] = OrderedDict()
        self._lengths: np.ndarray | None = None
        """Every row's length in tokens, by rowid, at ``_lengths_at``: what makes a phrase
        read whole carryable (read once on the thread, then patched by this process's writes)."""
        self._lengths_at: object = None
        self._totals: tuple[int, int] | None = None
        self._totals_at: object = None
        self._rows_of: dict[str, int] = {}
        self._held = 0
        self._lock = threading.Lock()
        self._jobs: queue.Queue[_Job] = queue.Queue()
        self._queued: set[_Key] = set()
        self._worker: threading.Thread | None = None
        self._later = threading.local()
        self._closed = False
        self.reads = 0
        """Phrases read from FTS5 alone since the start (a test's and a benchmark's measure)."""
        self.carries = 0
        """Phrases carried across a write instead of read again (tests, benchmarks)."""

    @property
    def held(self) -> int:
        return self._held

    def state(self, conn: sqlite3.Connection) -> object:
        """The index state ``conn`` reads (its transaction's, within one)."""
        return _state_of(conn)

    def wrote(self, before: object, after: object, removed: Sequence[int],
              inserted: Sequence[int]) -> None:
        """This process's write took the index from state ``before`` to ``after``, removing the
        FTS rows ``removed`` and inserting ``inserted`` (a rowid can be both: FTS5 gives a
        deleted last rowid again). Only what is recorded here is carried; a write by another
        process, or one that rewrote the table (a rebuild), leaves no record and drops all."""
        if before == after:
            return
        with self._lock:
            self._writes[after] = (before, np.asarray(sorted(set(removed) | set(inserted)),
                                                      np.int64),
                                   np.asarray(sorted(set(inserted)), np.int64))
            while len(self._writes) > WRITES_KEPT:
                self._writes.popitem(last=False)

    def top(self, conn: sqlite3.Connection, phrases: Sequence[str], limit: int,
            weights: tuple[float, float], connect: Callable[[], sqlite3.Connection] | None = None,
            ) -> list[tuple[int, float]] | None:
        """The first ``limit`` ``(rowid, score)`` of the OR of ``phrases``, best first, ties by
        rowid: what ``ORDER BY bm25(...), rowid LIMIT`` gives, read in one snapshot.

        None when over 1/COLD_SHARE of the rows the query matches are in phrases not kept (a
        start, a write by another process, or a query of rare words only): reading them alone
        would cost 2-2.5x their share of FTS5's whole query, so the caller asks FTS5 that and calls
        :meth:`read_later`: the common ones are read and kept on a thread of their own
        (``connect`` gives it its connection), at a lower priority, for the next searches."""
        self._later.job = None
        began = not conn.in_transaction
        if began:
            conn.execute("BEGIN")
        try:
            keys = [(t, *weights) for t in self._tokens.of(conn, phrases)]
            state, kept, rows, bounds = self._look(conn, phrases, keys)
            if connect is not None and self.warm is not None:
                self._warm_vocabulary(connect, state, weights)
            alone = [i for i, got in enumerate(kept) if got is None]

            def cold(sizes: Sequence[int]) -> bool:
                return sum(sizes[i] for i in alone) * COLD_SHARE > sum(sizes)

            # A phrase of words whose counts are known holds at most the rarest one's rows: if
            # even that bound leaves the query warm, the phrase is read without a count first.
            if connect is not None and cold([b if r is None else r for r, b in zip(rows, bounds,
                                                                                  strict=True)]):
                rows = [self._count(conn, state, phrases[i], keys[i]) if r is None else r
                        for i, r in enumerate(rows)]
                if cold(rows):
                    common = [(keys[i], phrases[i]) for i in alone
                              if rows[i] >= self.common_rows]
                    self._later.job = (connect, state, common) if common else None
                    return None
            parts = []
            for i, got in enumerate(kept):
                scores = None if got is None else self._scores(conn, state, got)
                if scores is None and rows[i] != 0:
                    got = bm25_rows.read(conn, phrases[i], weights, self._lengths_of(state))
                    self._keep(state, keys[i], got)
                    scores = got.scores
                if got is not None and scores is not None:
                    parts.append((got.rowids, scores))
        finally:
            if began:
                conn.execute("COMMIT")
        return _best(parts, limit)

    def forget(self) -> None:
        """Drop all that is kept, as a write by another process does (benchmarks: the first
        search after one)."""
        self.settle()
        with self._lock:
            self._state, self._held, self._warmed_at = None, 0, (None, -WARM_AGAIN_S)
            self._lengths = self._lengths_at = None
            for held in (self._kept, self._before, self._rows_of, self._queued):
                held.clear()

    def close(self) -> None:
        """No more reading on the thread (the manifest is closing its connections)."""
        self._closed = True
        self.settle()
        self._tokens.close()

    def settle(self) -> None:
        """Wait until the phrases put aside for later are read (tests, benchmarks)."""
        self._jobs.join()

    def _look(self, conn: sqlite3.Connection, phrases: Sequence[str], keys: Sequence[_Key],
              ) -> tuple[object, list[Rows | None], list[int | None], list[int]]:
        """The snapshot's state, each phrase's kept scores (None: not kept; carried here from
        an earlier state when it can be), each phrase's row count (a phrase not kept is
        counted once per state: a count reads no scores; None: not counted, as its words'
        counts bound it), and that bound."""
        state = _state_of(conn)
        with self._lock:
            if state != self._state:
                self._turn(conn, state)
        kept: list[Rows | None] = []
        rows: list[int | None] = []
        bounds: list[int] = []
        for phrase, key in zip(phrases, keys, strict=True):
            with self._lock:
                # Another search, reading an older or newer snapshot, may have turned the state
                # since the check above: what is kept is then another state's, not this one's.
                mine = state == self._state
                got = self._kept.get(key) if mine else None
                if got is not None:
                    self._kept.move_to_end(key)
                old = self._before.get(key) if got is None and mine else None
                count = self._rows_of.get(key[0]) if mine else None
                words = (key[0].split(" ") if mine and count is None
                         and not key[0].startswith("\0") else [])
                known = [self._rows_of.get(w) for w in words]
            if old is not None:
                got = self._carried(conn, state, key, phrase, *old)
            kept.append(got)
            if got is not None:
                rows.append(got.size)
                bounds.append(got.size)
                continue
            if count is None and len(known) > 1 and None not in known:
                bound = min(n for n in known if n is not None)
                rows.append(None if bound else 0)  # (a word of it in no row: nor is it)
                bounds.append(bound)
                continue
            if count is None:
                count = self._count(conn, state, phrase, key)
            rows.append(count)
            bounds.append(count)
        return state, kept, rows, bounds

    def _scores(self, conn: sqlite3.Connection, state: object, rows: Rows) -> np.ndarray | None:
        """A kept phrase's scores: a carryable one is kept as its rows' counts and lengths
        alone (8 bytes a row, not 16) and scored here for this state, the same doubles as
        FTS5's (:func:`bm25_rows.solve_freq` checked them, by the same function)."""
        if rows.freq is None or rows.length is None or rows.scores.size == rows.size:
            return rows.scores
        with self._lock:
            totals = self._totals if self._totals_at == state else None
        if totals is None:
            totals = bm25_rows.table_totals(conn)
            if totals is None:
                return None
            with self._lock:
                self._totals, self._totals_at = totals, state
        return bm25_rows.bm25(bm25_rows.idf(totals[0], rows.size), rows.freq, rows.length,
                              bm25_rows.avgdl(totals))

    def _count(self, conn: sqlite3.Connection, state: object, phrase: str, key: _Key) -> int:
        count = int(conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?",
                                 (phrase,)).fetchone()[0])
        with self._lock:
            if state == self._state:
                self._rows_of[key[0]] = count
        return count

    def _turn(self, conn: sqlite3.Connection, state: object) -> None:
        """A new index state (under the lock): what was kept waits in ``_before`` to be carried
        when a search needs it, if the writes since are this process's own; else it goes. The
        row lengths take in the rows those writes inserted (a range query per run)."""
        since = self._since(self._lengths_at, state) if self._lengths is not None else None
        self._lengths = None if since is None else bm25_rows.patch_lengths(conn, self._lengths,
                                                                           since[1])
        self._lengths_at = state
        before = {key: (self._state, k) for key, k in self._kept.items() if k.freq is not None}
        for key, entry in self._before.items():
            before.setdefault(key, entry)
        reach = {st: self._since(st, state) is not None for st in {st for st, _ in before.values()}}
        self._before = {key: entry for key, entry in before.items() if reach[entry[0]]}
        self._state = state
        self._kept.clear()
        self._rows_of.clear()
        self._queued.clear()
        self._held = sum(k.size for _, k in self._before.values())

    def _since(self, then: object, now: object) -> tuple[np.ndarray, np.ndarray] | None:
        """The rowids removed (or replaced) and inserted by this process's writes from state
        ``then`` to ``now``; None when a write between them is not known here."""
        removed: list[np.ndarray] = []
        inserted: list[np.ndarray] = []
        state = now
        for _ in range(len(self._writes) + 1):
            if state == then:
                return _union(removed), _union(inserted)
            step = self._writes.get(state)
            if step is None:
                return None
            state = step[0]
            removed.append(step[1])
            inserted.append(step[2])
        return None

    def _carried(self, conn: sqlite3.Connection, state: object, key: _Key, phrase: str,
                 then: object, old: Rows) -> Rows | None:
        """``old`` (kept at state ``then``) brought to this state, and kept; None when it
        cannot be exactly (the phrase is then read as one not kept)."""
        with self._lock:
            since = self._since(then, state) if state == self._state else None
            if self._before.get(key, (None, None))[1] is old:
                del self._before[key]
                self._held -= old.size
        new = None if since is None else bm25_rows.carry(conn, phrase, (key[1], key[2]),
                                                         old, *since)
        if new is not None:
            self._keep(state, key, new, carried=True)
        return new

    def _lengths_of(self, state: object) -> np.ndarray | None:
        with self._lock:
            return self._lengths if self._lengths_at == state else None

    def read_later(self) -> None:
        """Read the common phrases this thread's last :meth:`top` put aside: called once FTS5
        has answered, so the reading does not compete with the search that asked."""
        job = getattr(self._later, "job", None)
        self._later.job = None
        if job is None:
            return
        connect, state, wanted = job
        with self._lock:
            wanted = [(key, p) for key, p in (wanted or ()) if key not in self._queued]
            self._queued.update(key for key, _ in wanted)
        if wanted:
            self._put((connect, state, wanted))

    def _warm_vocabulary(self, connect: Callable[[], sqlite3.Connection], state: object,
                         weights: tuple[float, float]) -> None:
        """Queue the vocabulary warm once per state that holds nothing yet (a start, or a
        write by another process: this process's own writes carry what it holds), and not
        again within ``WARM_AGAIN_S`` of the last one."""
        with self._lock:
            now, (at, when) = time.monotonic(), self._warmed_at
            if at == state or self._held or state != self._state or now < when + WARM_AGAIN_S:
                return
            self._warmed_at = (state, now)
        self._put((connect, state, weights))

    def _put(self, job: _Job) -> None:
        with self._lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._warm, daemon=True,
                                                name="mdsearch-phrase-scores")
                self._worker.start()
        self._jobs.put(job)

    def _vocabulary(self, conn: sqlite3.Connection, state: object,
                    weights: tuple[float, float]) -> list[tuple[_Key, str]]:
        """The index's commonest words, commonest first, up to ``WARM_SHARE`` of the budget, each
        one that reads as itself, for ``conn`` to read (the list is from a connection of its own:
        a reader's is query-only); every word's row count is noted when it is this state's."""
        counted_at, counts = word_counts(conn, _state_of)
        with self._lock:
            if counted_at == state and state == self._state:
                self._rows_of.update((term, n) for n, term in counts)
        if (totals := bm25_rows.table_totals(conn)) and PER_ROW * totals[0] > BUDGET:
            self.budget = max(self.budget, PER_ROW * totals[0])
        skip = self.warm or frozenset()
        words: list[str] = []
        room = self.budget * WARM_SHARE
        for n, term in sorted(counts, reverse=True):
            if n >= self.common_rows and n <= room and term not in skip:
                words.append(term)
                room -= n
        phrases = ['"' + w + '"' for w in words]
        return [((w, *weights), p) for w, p, t in
                zip(words, phrases, self._tokens.of(conn, phrases), strict=True) if t == w]

    def _warm(self) -> None:
        """Read and keep what searches put aside, and the vocabulary, in the state they met (a
        job of an older state is dropped: its scores would be stale). Niced: a search or a
        command started meanwhile gets the cores first."""
        with contextlib.suppress(OSError, AttributeError):  # (Linux: a thread's own niceness)
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        while True:
            connect, state, wanted = self._jobs.get()
            try:
                if self._closed:
                    continue
                conn = connect()
                conn.execute("BEGIN")
                try:
                    if _state_of(conn) != state:
                        continue
                    if self.carry and self._lengths_of(state) is None:
                        lengths = bm25_rows.all_lengths(conn)  # once; then patched per write
                        with self._lock:
                            if self._state == state:
                                self._lengths, self._lengths_at = lengths, state
                    if isinstance(wanted, tuple):
                        wanted = self._vocabulary(conn, state, wanted)
                    for key, phrase in wanted:
                        if self._closed or self._state != state:
                            break
                        with self._lock:
                            have = key in self._kept
                        if not have:
                            self._keep(state, key, bm25_rows.read(
                                conn, phrase, (key[1], key[2]), self._lengths_of(state)))
                finally:
                    conn.execute("COMMIT")
                if len(wanted) > 100:  # (each phrase's rows passed through Python objects)
                    release_free_memory()
            except Exception:  # a closed or damaged manifest: searches read what they need
                pass
            finally:
                self._jobs.task_done()

    def _keep(self, state: object, key: _Key, scores: Rows, carried: bool = False) -> None:
        size = scores.size
        with self._lock:
            if state == self._state:
                self._rows_of[key[0]] = size
            if carried:
                self.carries += 1
            else:
                self.reads += 1
            if (size < self.common_rows or size > self.budget or state != self._state
                    or key in self._kept):
                return
            while self._held + size > self.budget and (self._before or self._kept):
                if self._before:  # waiting to be carried goes before what this state needed
                    old = self._before.pop(next(iter(self._before)))[1]
                else:
                    old = self._kept.popitem(last=False)[1]
                self._held -= old.size
            self._kept[key] = scores if scores.freq is None else scores._replace(scores=_UNSCORED)
            self._held += size


def _union(rowids: list[np.ndarray]) -> np.ndarray:
    return np.unique(np.concatenate(rowids)) if rowids else np.zeros(0, np.int64)


def _best(parts: list[tuple[np.ndarray, np.ndarray]], limit: int) -> list[tuple[int, float]]:
    """Each row's summed score, and the first ``limit`` rows: best first, then by rowid."""
    parts = [p for p in parts if p[0].size]
    if not parts or limit < 1:
        return []
    rowids = np.concatenate([r.astype(np.int64, copy=False) for r, _ in parts])
    scores = np.concatenate([s for _, s in parts])
    top = int(rowids.max())
    if top < 4 * rowids.size + 1_000_000:
        # Dense: one slot per rowid (bincount adds in input order, phrase after phrase).
        total = np.bincount(rowids, weights=scores, minlength=top + 1)
        matched = np.zeros(top + 1, dtype=bool)
        matched[rowids] = True
        cand = np.flatnonzero(matched)
        sums = total[cand]
    else:  # rowids far apart (an index rewritten many times over): sorted instead
        cand, inverse = np.unique(rowids, return_inverse=True)
        sums = np.bincount(inverse, weights=scores, minlength=cand.size)
    if cand.size > limit:
        cut = np.partition(sums, cand.size - limit)[cand.size - limit]
        keep = sums >= cut  # every row tied with the last one kept, so ties go by rowid
        cand, sums = cand[keep], sums[keep]
    order = np.lexsort((cand, -sums))[:limit]
    return [(int(cand[i]), float(sums[i])) for i in order]
