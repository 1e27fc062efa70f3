"""kill -9 of ``mdsearch index`` during a first index: nothing committed is lost or redone.

A real process with the real model over the demo vault, killed at several points found by
watching its manifest grow (read from outside as another process would, never by sleeping): before
anything is committed, then each time a run has committed a batch beyond what the previous run
left. The committed part must grow from run to run, the final run must embed exactly what no
earlier run committed, and the final index must equal a clean build of the same notes, with
Chroma answering for every vector (its graph replayed after every kill).
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index.layout import space_name
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import REPO, FakeEmbedder, copy_vault
from tests.index_state import assert_consistent, clean_build, snapshot

pytestmark = pytest.mark.slow


def committed(manifest: Path) -> tuple[int, int, str]:
    """(vectors, notes, index state) committed so far; zeros before the manifest exists."""
    if not manifest.exists():
        return 0, 0, ""
    try:
        conn = sqlite3.connect(f"file:{manifest}?mode=ro", uri=True, timeout=10)
        try:
            vectors = conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
            notes = conn.execute("SELECT COUNT(*) FROM files").fetchone()[0]
            row = conn.execute("SELECT value FROM meta WHERE key = 'index_state'").fetchone()
            return int(vectors), int(notes), row[0] if row else ""
        finally:
            conn.close()
    except sqlite3.OperationalError:  # being created: no tables yet
        return 0, 0, ""


def wait_for(cond: Callable[[], bool], proc: subprocess.Popen[str], timeout: float = 600) -> None:
    """Poll ``cond`` until it holds; fail if the process ends first or time runs out."""
    deadline = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"mdsearch index ended (exit {proc.returncode}) before the kill point:"
                        f"\n{out}\n{err[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the kill point was not reached in time")
        time.sleep(0.01)  # polling interval of the condition above, not a synchronisation


def test_kill_9_during_a_first_index(tmp_path: Path) -> None:
    vault = copy_vault(tmp_path / "vault")  # 149 chunks, and 100 short ones more: room for
    # four runs that each commit at least one batch of 16 before the last one finishes
    (vault / "Log.md").write_text("# Log\n\n" + "\n".join(
        f"## Day {i}\n\nShipped change {i} to the {('billing', 'search', 'sync')[i % 3]} service.\n"
        for i in range(100)), encoding="utf-8")
    index = tmp_path / "index"
    manifest = index / f"{space_name(Settings())}.sqlite3"
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(tmp_path / "cache")}

    def start(*extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "mdsearch_ls", "index", str(vault), "--index-dir",
             str(index), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
        )

    def kill(proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        assert proc.returncode == -signal.SIGKILL

    # 1. Killed after it opened the index and started the run, before any batch was committed
    # (the model is still loading).
    proc = start()
    wait_for(lambda: committed(manifest)[2].startswith("building"), proc)
    kill(proc)
    history = [committed(manifest)[:2]]
    # 2-4. Each run killed right after it committed a batch beyond what the last run left.
    for _ in range(3):
        before = history[-1][0]
        proc = start()
        wait_for(lambda before=before: committed(manifest)[0] > before, proc)
        kill(proc)
        history.append(committed(manifest)[:2])
    print("committed (vectors, notes) after each kill:", history)  # shown with -s / on failure
    vectors = [v for v, _ in history]
    assert vectors == sorted(vectors) and len(set(vectors[1:])) == 3, history  # it grows
    assert [n for _, n in history] == sorted(n for _, n in history)

    # 5. The last run finishes and embeds only what no killed run committed.
    proc = start()
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-3000:]
    embedded = int(re.search(r"(\d+) embedded", out).group(1))  # type: ignore[union-attr]
    with Workspace.open(vault, Settings(), embedder=FakeEmbedder(),
                        index_dir=index) as ws:
        assert ws.healed is None and ws.repaired == 0  # the CLI left it sound
        distinct = ws.manifest._conn().execute(
            "SELECT COUNT(DISTINCT embed_hash) FROM chunks").fetchone()[0]
        assert embedded == distinct - history[-1][0]
        final = snapshot(ws)
        assert_consistent(ws)
        # Chroma's graph holds every vector, not only its tables.
        assert ws.store.probe(ws.manifest.sample_vectors(400)) is None
    clean = clean_build(vault, tmp_path / "clean", FakeEmbedder())
    assert final == clean, final.diff(clean)

    # And the index answers as a user asks it.
    res = subprocess.run(
        [sys.executable, "-m", "mdsearch_ls", "search", "crisis escalation threshold", "--root",
         str(vault), "--index-dir", str(index), "--json", "-k", "1"],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert '"operations/Crisis management and escalation.md"' in res.stdout
