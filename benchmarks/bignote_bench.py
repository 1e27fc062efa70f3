"""One huge note in a vault: how soon the first index commits, and when the rest is searchable.

    python benchmarks/bignote_bench.py [--notes 40] [--headings 10000] [--limit 900]
                                       [--base DIR] [--out FILE]

The vault is the first ``--notes`` notes of ``../shared/corpora/obsidian-help`` plus
``0-huge.md``, a note of ``--headings`` short sections (one chunk each) that sorts first, so a
scan meets it before anything else. Each code tree (this one, and ``--base``, an older checkout,
to compare) indexes it from scratch with the bundled model in a child process, timed from the
moment the model is loaded; the parent reads the manifest every 50 ms from outside, as another
process would, and records:

* ``first_commit_s``: the first vector in the manifest (the first work a kill cannot lose);
* ``small_notes_s``: every one of the other notes indexed (searchable);
* ``total_s``: the run finished (or ``null`` when it was still running at ``--limit``);
* the chunks of the huge note indexed, and how many commits (vector-count changes) were seen.

Results: printed, and ``benchmarks/results/bignote.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpora" / "obsidian-help"
HUGE = "0-huge.md"

CHILD = r"""
import sys, time
from mdsearch_ls.config import Settings
from mdsearch_ls.engine.api import Workspace, create_embedder
root, index = sys.argv[1], sys.argv[2]
embedder = create_embedder(Settings())
embedder.load()
ws = Workspace.open(root, Settings(), embedder=embedder, index_dir=index)
print("start", flush=True)
report = ws.index()
print("done", report.summary(), flush=True)
ws.close()
"""


def huge_note(headings: int) -> str:
    words = ["release", "backup", "invoice", "meeting", "deploy", "review", "budget", "travel"]
    return "# Changelog\n\n" + "\n".join(
        f"## Entry {i}: {words[i % len(words)]}\n\n"
        f"Entry {i} records a {words[(i * 3) % len(words)]} on day {i % 365}.\n"
        for i in range(headings)
    )


def make_vault(dest: Path, notes: int, headings: int) -> list[str]:
    small = sorted(p for p in CORPUS.rglob("*.md"))[:notes]
    rels = []
    for p in small:
        rel = p.relative_to(CORPUS).as_posix()
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, dest / rel)
        rels.append(rel)
    (dest / HUGE).write_text(huge_note(headings), encoding="utf-8")
    return rels


def poll(manifest_dir: Path) -> tuple[int, int, int] | None:
    """(vectors, other notes indexed, huge-note chunks) or None while there is no manifest."""
    found = sorted(manifest_dir.glob("*.sqlite3"))
    if not found:
        return None
    try:
        conn = sqlite3.connect(f"file:{found[0]}?mode=ro", uri=True, timeout=5)
        try:
            vectors = conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
            others = conn.execute(
                "SELECT COUNT(*) FROM files WHERE path != ?", (HUGE,)).fetchone()[0]
            huge = conn.execute(
                "SELECT COUNT(*) FROM chunks WHERE path = ?", (HUGE,)).fetchone()[0]
            return int(vectors), int(others), int(huge)
        finally:
            conn.close()
    except sqlite3.Error:
        return None


def run(code: Path, vault: Path, notes: int, limit: float) -> dict[str, object]:
    index = Path(tempfile.mkdtemp(prefix="bignote-index-"))
    env = {**os.environ, "PYTHONPATH": str(code), "MDSEARCH_CACHE_DIR": str(index / "cache")}
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(vault), str(index)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env, cwd=code)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("start"):
        proc.kill()
        raise SystemExit(f"child did not start: {line!r}")
    t0 = time.monotonic()
    first_commit = small_done = total = None
    commits, last_vectors, huge = 0, 0, 0
    while True:
        now = time.monotonic() - t0
        state = poll(index)
        if state is not None:
            vectors, others, huge = state
            if vectors != last_vectors:
                commits += 1
                last_vectors = vectors
            if vectors and first_commit is None:
                first_commit = now
            if others >= notes and small_done is None:
                small_done = now
        if proc.poll() is not None:
            total = now
            break
        if now > limit:
            proc.kill()
            proc.wait()
            break
        time.sleep(0.05)  # the polling interval
    summary = proc.stdout.read().strip() if total is not None else ""
    shutil.rmtree(index, ignore_errors=True)
    return {"code": str(code), "first_commit_s": first_commit, "small_notes_s": small_done,
            "total_s": total, "huge_chunks_indexed": huge, "commits_seen": commits,
            "vectors": last_vectors, "summary": summary, "limit_s": limit}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--notes", type=int, default=40)
    ap.add_argument("--headings", type=int, default=10_000)
    ap.add_argument("--limit", type=float, default=900.0, help="seconds before a run is stopped")
    ap.add_argument("--base", type=Path, help="an older checkout to compare with")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bignote.json")
    args = ap.parse_args()
    vault = Path(tempfile.mkdtemp(prefix="bignote-vault-"))
    rels = make_vault(vault, args.notes, args.headings)
    rows = []
    for code in [ROOT, *([args.base] if args.base else [])]:
        row = run(code.resolve(), vault, len(rels), args.limit)
        rows.append(row)
        def fmt(v: object) -> str:
            return f"{v:.1f} s" if isinstance(v, float) else "not within the limit"
        print(f"{code}: first commit {fmt(row['first_commit_s'])}, the {len(rels)} other notes "
              f"{fmt(row['small_notes_s'])}, total {fmt(row['total_s'])}; "
              f"{row['huge_chunks_indexed']} chunks of the huge note, "
              f"{row['commits_seen']} commits seen")
    shutil.rmtree(vault, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "notes": len(rels), "headings": args.headings, "machine": platform.platform(),
        "cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg(), "runs": rows,
    }, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
