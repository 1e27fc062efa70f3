"""A process that holds the manifest open keeps its SQLite locks, whatever else it reads.

SQLite's locks are POSIX advisory locks: closing any descriptor of the file releases all of a
process's locks on it. The open's cheap damage check (the header against the file's size) and
the seal once read the header through a file of their own while a connection was open, so
another process's last close took the file as unused and deleted its write-ahead log and
shared-memory index under the holder: a background process's next connection failed with
"disk I/O error" on every search (found at 96k chunks), and its writes went to a log no other
process could see. These tests use real SQLite files and a second real process.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from mdsearch_ls.engine.index.manifest import Manifest
from mdsearch_ls.engine.index.manifest_schema import file_key, held, seal_kept


def _other_process(path: Path, sql: str) -> str:
    """Run one statement in another process (connect, run, commit, close) and return its
    first value: the close is what deletes a log it takes for unused."""
    code = ("import sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], timeout=30)\n"
            "row = c.execute(sys.argv[2]).fetchone()\n"
            "c.commit()\n"
            "c.close()\n"
            "print('' if row is None else row[0])\n")
    done = subprocess.run([sys.executable, "-c", code, str(path), sql], capture_output=True,
                          text=True, check=True)
    return done.stdout.strip()


def _in_new_thread(fn):  # a thread of its own: the manifest gives it a new connection
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except Exception as exc:  # the failure is the test's to report
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out["value"]


def _sealed_manifest(tmp_path: Path) -> Path:
    path = tmp_path / "m.sqlite3"
    m = Manifest(path)
    m.set_meta("before", "1")
    m.close()
    assert seal_kept(path)
    return path


def test_a_writer_reopening_a_sealed_file_keeps_its_log_when_another_process_closes(
        tmp_path: Path) -> None:
    path = _sealed_manifest(tmp_path)
    writer = Manifest(path)
    try:
        assert writer.checked == "header"  # the open that read the file's own bytes
        writer.set_meta("mine", "1")
        assert _other_process(path, "SELECT value FROM meta WHERE key = 'mine'") == "1"
        wal, shm = (path.with_name(path.name + s) for s in ("-wal", "-shm"))
        assert wal.exists() and shm.exists()
        # a new thread's connection, as a server's request thread opens one
        assert _in_new_thread(lambda: writer.get_meta("mine")) == "1"
        _in_new_thread(lambda: writer.set_meta("later", "2"))
        assert _other_process(path, "SELECT value FROM meta WHERE key = 'later'") == "2"
    finally:
        writer.close()
    assert seal_kept(path)
    assert not held(file_key(path))  # every connection counted out, the parked descriptors shut
