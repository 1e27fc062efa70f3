"""What FTS5's tokenizer makes of a phrase, and which words an index holds, asked of FTS5 itself.

Kept keyword scores (engine/index/phrase_scores.py) are keyed by a phrase's tokens, so that two
spellings of one word ("shows", "show": the porter stemmer) share what was read. A stemmer of our
own could disagree with SQLite's on some word and key two different phrases alike; this runs the
index's own tokenizer, on a table in a private in-memory database (a reader's connection to the
index is query-only: not even a temporary table), about 0.2 ms for a question's phrases.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path


class Tokens:
    """The tokenizer of one index's ``chunks_fts`` table, learnt from its schema once."""

    def __init__(self) -> None:
        self._spec: str | None = None
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def of(self, conn: sqlite3.Connection, phrases: Sequence[str]) -> list[str]:
        """Each phrase's tokens, joined by a space (a token holds none); a phrase of no token,
        or any phrase of a table whose tokenizer is not known, as its text with a NUL first,
        which no tokens are."""
        raw = ["\0" + p for p in phrases]
        with self._lock:
            if self._spec is None:
                row = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'chunks_fts'"
                                   ).fetchone()
                found = re.search(r"tokenize\s*=\s*'([^']*)'", row[0] if row else "")
                self._spec = found.group(1) if found else ""
                if self._spec:
                    self._db = sqlite3.connect(":memory:", check_same_thread=False)
                    self._db.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize = "
                                     f"'{self._spec}')")
                    self._db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
            db = self._db
            if db is None or not phrases:
                return raw
            with db:
                db.executemany("INSERT INTO t(rowid, x) VALUES (?, ?)", enumerate(phrases))
                got = db.execute("SELECT doc, term FROM v ORDER BY doc, offset").fetchall()
                db.execute("DELETE FROM t")
        tokens: list[list[str]] = [[] for _ in phrases]
        for doc, term in got:
            tokens[doc].append(term)
        return [" ".join(t) if t else r for t, r in zip(tokens, raw, strict=True)]

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
            self._db, self._spec = None, ""


def word_counts(conn: sqlite3.Connection, state_of: Callable[[sqlite3.Connection], object],
                ) -> tuple[object, list[tuple[int, str]]]:
    """Every word of the index ``conn`` reads, with the rows that hold it (FTS5's vocabulary
    table: 0.3 s for 16k words at 96k chunks), and ``state_of`` the snapshot they were read in.
    On a connection of its own, read-only: a reader's own connection is query-only, and the
    vocabulary table is a (temporary) table to create."""
    where = next((r[2] for r in conn.execute("PRAGMA database_list") if r[1] == "main"), "")
    if not where:
        return None, []
    db = sqlite3.connect(f"{Path(where).as_uri()}?mode=ro", uri=True)
    try:
        db.execute("CREATE VIRTUAL TABLE temp.words USING fts5vocab(main, chunks_fts, 'row')")
        db.execute("BEGIN")
        state = state_of(db)
        counts = db.execute("SELECT doc, term FROM temp.words").fetchall()
        db.execute("COMMIT")
    finally:
        db.close()
    return state, counts
