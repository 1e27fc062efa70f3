"""A million chunks through the real write path: memory, time, size, and whether the index works.

    PYTHONPATH=. python benchmarks/million_bench.py [--chunks 1000000] [--sections 8]
                                                    [--work /tmp/million] [--out FILE] [--keep]
                                                    [--chroma-server] [--steps a,b,...]
                                                    [--real-index DIR]

Embedding a million real chunks takes hours on this machine, so **the model is the only fake
part** of the index: a stand-in embedder returns vectors shaped like the real model's (each
text's vector is one of the real all-MiniLM-L6-v2 vectors of an existing tldr index, under
``--real-index``, by default ``scale_bench.py``'s, picked by the text's hash and perturbed by
Gaussian noise of sigma 0.03, then normalised; random unit vectors when no real index is at
hand, and the results' ``embedder`` says which). Questions (the ``queries`` step) are embedded
by the real model. Everything else is the engine's own: notes written to disk (tldr pages at
``/work/shared/corpora/tldr/pages`` turned into notes of ``--sections`` headed sections, each
note numbered so no two sections embed the same text), ``Workspace.open`` (the process that
holds the index), the scan, the chunker, the vector cache, the Chroma upserts, the manifest and
FTS5 transactions and the clean close.

Each step runs in a process of its own, so its peak RSS is its own (``VmHWM`` of that process,
and the anonymous / file-backed split sampled from ``/proc/self/status`` every 0.2 s):

- ``build``: open, ``index()``, close -- wall time, chunks/s over the run;
- ``reopen``: an open and a first and second hybrid search (the query vector from the
  stand-in: no model load is counted);
- ``keyword``: an open and a keyword search;
- ``noop``: an open, ``index()`` with nothing changed, close;
- ``update``: an open, one note edited and ``update([it])``, the search after it, close;
- ``queries``: hybrid, semantic and keyword p50/p95 in the process that holds the index over
  40 nl2bash questions as typed, k=10 (``scale_bench.in_process``: the same parts as at 96k).

A step run alone (``--steps queries``, with ``--keep`` before) replaces only its own entry of
the results.

With ``--chroma-server`` the vectors go to a real ``chroma run`` on loopback (the
``chroma_url`` setting), and the server's own peak RSS is reported beside each step's.

Results go to ``benchmarks/results/million.json`` (``--out``) and stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
import scale_bench  # noqa: E402  (its in-process part, as at 96k)

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.api import SearchRequest, create_embedder  # noqa: E402
from mdsearch_ls.engine.workspace import Workspace  # noqa: E402
from tests.chroma_server import ChromaServer  # noqa: E402

TLDR = REPO.parent / "shared" / "corpora" / "tldr" / "pages"
REAL_INDEX_ENV = "MILLION_BENCH_REAL_INDEX"
"""Where the steps look for a real tldr index (``--real-index``; read-only)."""
DIM = 384
NOTES_PER_DIR = 1000
CHROMA_URL_ENV = "MILLION_BENCH_CHROMA_URL"
"""How the steps learn the ``--chroma-server`` URL (each runs in a process of its own)."""


# ---- the stand-in model ------------------------------------------------------------------------


def real_vectors(limit: int = 20_000) -> Any:
    """Real all-MiniLM-L6-v2 vectors of a tldr index on this machine (read-only), or None.

    The first index under ``--real-index`` (``scale_bench.py``'s cache by default, whose ``v8``
    is the tldr pages once) with at least 1,000 vectors."""
    if not os.environ.get(REAL_INDEX_ENV):
        return None
    for manifest in sorted(Path(os.environ[REAL_INDEX_ENV]).glob("*/all-MiniLM-L6-v2-*.sqlite3")):
        try:
            with sqlite3.connect(f"file:{manifest}?mode=ro", uri=True) as db:
                blobs = db.execute("SELECT vector FROM vectors LIMIT ?", (limit,)).fetchall()
        except sqlite3.Error:
            continue
        if len(blobs) >= 1000:
            return np.stack([np.frombuffer(b, dtype=np.float32) for (b,) in blobs])
    return None


class SyntheticEmbedder:
    """Vectors shaped like the model's, instantly: a real vector picked by the text's hash,
    perturbed and normalised. Deterministic per text, so a re-run caches the same vectors."""

    loaded = True

    def __init__(self, base: Any) -> None:
        if base is None:
            rng = np.random.default_rng(0)
            base = rng.normal(size=(4096, DIM)).astype(np.float32)
            base /= np.linalg.norm(base, axis=1, keepdims=True)
        self.base = base
        self.name = "synthetic-minilm-shaped"
        self.dimension = int(base.shape[1])
        self.documents = 0

    def load(self) -> None:
        """Nothing to load."""

    def _one(self, text: str) -> Any:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
        rng = np.random.default_rng(seed)
        v = self.base[seed % len(self.base)] + rng.normal(0, 0.03, self.dimension)
        return (v / np.linalg.norm(v)).astype(np.float32)

    def embed_documents(self, texts: Sequence[str]) -> Any:
        self.documents += len(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self._one(t) for t in texts])

    def embed_query(self, text: str) -> Any:
        return self._one(text)


# ---- the vault ---------------------------------------------------------------------------------


def tldr_sections() -> list[tuple[str, str, list[tuple[str, str]]]]:
    """``(name, summary, [(description, command)])`` of every tldr page."""
    pages = []
    for path in sorted(TLDR.rglob("*.md")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        summary = " ".join(ln[2:] for ln in lines if ln.startswith("> ") and "http" not in ln)
        examples: list[tuple[str, str]] = []
        desc = None
        for ln in lines:
            if ln.startswith("- "):
                desc = ln[2:].rstrip(":")
            elif ln.startswith("`") and desc:
                examples.append((desc, ln.strip("`")))
                desc = None
        if examples:
            pages.append((path.stem, summary, examples))
    return pages


def note_text(i: int, pages: list[tuple[str, str, list[tuple[str, str]]]], sections: int) -> str:
    """Note ``i``: a tldr page's examples as ``sections`` headed sections (the next pages'
    when it has fewer), numbered so that every section's text is its own."""
    name, summary, _ = pages[i % len(pages)]
    out = [f"# {name} notes {i}", "", summary, ""]
    j = i
    examples: list[tuple[str, str, str]] = []
    while len(examples) < sections:
        other, osum, exs = pages[j % len(pages)]
        examples.extend((other, osum, f"{d}|{c}") for d, c in exs)
        j += 1
    for s, (page, psum, pair) in enumerate(examples[:sections]):
        desc, cmd = pair.split("|", 1)
        out += [f"## {desc} ({i}.{s})", "",
                f"From the {page} page, variant {i}: {psum}", "",
                "```sh", cmd, "```", ""]
    return "\n".join(out)


def make_vault(vault: Path, notes: int, sections: int) -> float:
    t0 = time.perf_counter()
    pages = tldr_sections()
    for i in range(notes):
        folder = vault / f"d{i // NOTES_PER_DIR:04d}"
        if i % NOTES_PER_DIR == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"n{i:07d}.md").write_text(note_text(i, pages, sections), encoding="utf-8")
    return time.perf_counter() - t0


# ---- measuring one process ---------------------------------------------------------------------


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
                out[key] = int(rest.split()[0]) // 1024  # MB
    return out


class Sampler:
    """Peak RSS of this process per phase: VmHWM (reset at each phase through
    ``/proc/self/clear_refs``) and the sampled peak of its anonymous and file-backed parts."""

    def __init__(self) -> None:
        self.phases: dict[str, dict[str, float]] = {}
        self._cur: dict[str, float] | None = None
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample()

    def _sample(self) -> None:
        cur = self._cur
        if cur is None:
            return
        s = _status()
        cur["anon_peak_mb"] = max(cur.get("anon_peak_mb", 0), s.get("RssAnon", 0))
        cur["file_peak_mb"] = max(cur.get("file_peak_mb", 0), s.get("RssFile", 0))

    def start(self, name: str) -> None:
        with contextlib.suppress(OSError):  # reset VmHWM to the current RSS
            Path("/proc/self/clear_refs").write_text("5")
        self._cur = {"t0": time.perf_counter()}
        self.phases[name] = self._cur
        self._sample()

    def end(self) -> dict[str, float]:
        cur = self._cur
        assert cur is not None
        self._sample()
        cur["seconds"] = round(time.perf_counter() - cur.pop("t0"), 2)
        cur["peak_rss_mb"] = _status()["VmHWM"]
        self._cur = None
        return cur

    def stop(self) -> None:
        self._stop.set()


def _settings() -> Settings:
    return Settings(chroma_url=os.environ.get(CHROMA_URL_ENV) or None)


def _open(root: Path, embedder: Any) -> Workspace:
    return Workspace.open(root, _settings(), embedder=embedder)


def _search(ws: Workspace, query: str, mode: str) -> int:
    return len(ws.search(SearchRequest.build(query, k=10, mode=mode)).hits)


def phase(name: str, root: Path) -> dict[str, Any]:
    """One step, in this process (see the module docstring)."""
    embedder = SyntheticEmbedder(real_vectors())
    s = Sampler()
    out: dict[str, Any] = {}
    query = "extract a compressed archive into a directory"
    if name == "build":
        marks: list[tuple[float, int]] = []
        t0 = time.perf_counter()

        def progress(done: int, total: int, chunks: int) -> None:
            now = time.perf_counter() - t0
            if not marks or now - marks[-1][0] >= 30:
                marks.append((now, chunks))
                print(f"  {now:7.0f}s  {done:,}/{total:,} notes  {chunks:,} chunks  "
                      f"rss {_status()['VmRSS']} MB", file=sys.stderr, flush=True)

        s.start("open")
        ws = _open(root, embedder)
        out["open"] = s.end()
        s.start("index")
        report = ws.index(progress)
        out["index"] = s.end()
        out["index"].update(chunks=report.chunks_total, notes=report.files_total,
                            chunks_per_s=round(report.chunks_total / report.seconds))
        out["progress"] = [(round(t), c) for t, c in marks]
        s.start("close")
        ws.close()
        out["close"] = s.end()
    elif name in ("reopen", "keyword"):
        mode = "hybrid" if name == "reopen" else "keyword"
        s.start("open")
        ws = _open(root, embedder)
        out["open"] = s.end()
        s.start("first_search")
        out["hits"] = _search(ws, query, mode)
        out["first_search"] = s.end()
        s.start("second_search")
        _search(ws, "list the files in a folder sorted by size", mode)
        out["second_search"] = s.end()
        ws.close()
    elif name == "noop":
        s.start("open")
        ws = _open(root, embedder)
        out["open"] = s.end()
        s.start("index")
        report = ws.index()
        out["index"] = s.end()
        out["index"]["indexed"] = report.files_indexed
        s.start("close")
        ws.close()
        out["close"] = s.end()
    elif name == "update":
        note = next(iter(sorted((root / "d0000").glob("*.md"))))
        s.start("open")
        ws = _open(root, embedder)
        out["open"] = s.end()
        with note.open("a", encoding="utf-8") as f:
            f.write(f"\n## edited {time.time()}\n\nA new section about rotating log files.\n")
        s.start("update")
        report = ws.update([note])
        out["update"] = s.end()
        out["update"]["embedded"] = report.chunks_embedded
        s.start("search_after")
        out["hits"] = _search(ws, "rotating log files", "hybrid")
        out["search_after"] = s.end()
        s.start("close")
        ws.close()
        out["close"] = s.end()
    elif name == "queries":
        out.update(queries(root))
    else:
        raise SystemExit(f"unknown phase {name}")
    s.stop()
    out["process_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def queries(root: Path, n: int = 40) -> dict[str, Any]:
    """``scale_bench.in_process`` on this index: the same questions and parts as at 96k
    (nl2bash questions as typed, k=10, none met before, each list alone too), questions by the
    real model. An index built by the stand-in opens under the stand-in's name; the model's
    load is not timed."""
    settings = _settings()
    real = create_embedder(settings)
    real.embed_query("load the model")
    return {"in_process": scale_bench.in_process(
        root, scale_bench.queries()[100: 100 + n], settings=settings,
        embedder=QueryModel(real_vectors(), real))}


class QueryModel(SyntheticEmbedder):
    """The stand-in's name and documents, the real model's questions: a question is embedded
    as a user's would be (its neighbours are the perturbed real vectors of the pages that
    answer it)."""

    def __init__(self, base: Any, real: Any) -> None:
        super().__init__(base)
        self.real = real
        self._cache = real._cache  # scale_bench.in_process clears it before each timed run

    def embed_query(self, text: str) -> Any:
        return self.real.embed_query(text)


def run_phase(name: str, root: Path, env: dict[str, str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--phase", name, "--root", str(root)],
        env=env, stdout=subprocess.PIPE, text=True, check=True,
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = round(time.perf_counter() - t0, 2)
    print(f"{name}: {json.dumps(out)}", file=sys.stderr, flush=True)
    return out


def _peak_of(pid: int) -> int:
    """Another process's peak RSS so far (``VmHWM``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return -1


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=1_000_000)
    ap.add_argument("--sections", type=int, default=8, help="sections (chunks) per note")
    ap.add_argument("--work", type=Path, default=Path("/tmp/million"))
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/million.json")
    ap.add_argument("--keep", action="store_true", help="keep the vault and index")
    ap.add_argument("--steps", default="build,reopen,keyword,noop,update")
    ap.add_argument("--chroma-server", action="store_true",
                    help="keep the vectors on a `chroma run` server (the chroma_url setting), "
                         "as the README advises for a vault this size; its own peak RSS is "
                         "reported apart")
    ap.add_argument("--real-index", type=Path,
                    default=Path("/tmp/mdsearch-scale/cache-v8/indexes"),
                    help="indexes to take real vectors from (scale_bench.py's, by default); "
                         "random unit vectors when none is there")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.phase:
        print(json.dumps(phase(args.phase, args.root)))
        return 0

    notes = args.chunks // (args.sections + 1)  # the title section is a chunk too
    work = args.work / f"c{args.chunks}"
    vault, cache = work / "vault", work / "cache"
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO),
           REAL_INDEX_ENV: str(args.real_index)}
    os.environ[REAL_INDEX_ENV] = str(args.real_index)
    result: dict[str, Any] = {"chunks_asked": args.chunks, "notes": notes,
                              "sections_per_note": args.sections,
                              "embedder": "synthetic: " + (
                                  "perturbed real all-MiniLM-L6-v2 vectors"
                                  if real_vectors() is not None else "random unit vectors"),
                              "cpus": os.cpu_count(), "load_at_start": os.getloadavg()[0]}
    if not vault.exists():
        made = make_vault(vault, notes, args.sections)
        print(f"vault of {notes:,} notes written in {made:.0f}s", file=sys.stderr)
    result["vault_mb"] = round(du(vault) / 2**20)
    server = None
    if args.chroma_server:
        server = ChromaServer(work / "chroma-server").start()
        env[CHROMA_URL_ENV] = server.url
        result["vectors"] = "on a chroma run server (chroma_url)"
    for step in args.steps.split(","):
        result[step] = run_phase(step, vault, env)
        if server is not None and server.proc is not None:
            result[step]["chroma_server_peak_rss_mb"] = _peak_of(server.proc.pid)
        if step == "build":
            index = next(cache.glob("indexes/*"))
            sizes = {"total": du(index), "chroma": du(index / "chroma"),
                     "manifest": sum(f.stat().st_size for f in index.glob("*.sqlite3*"))}
            result["index_mb"] = {k: round(v / 2**20) for k, v in sizes.items()}
    if server is not None:
        server.stop()
        served = round(du(work / "chroma-server") / 2**20)
        result.setdefault("index_mb", {})["chroma_server"] = served
    result["load_at_end"] = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    key = f"{args.chunks}{'_chroma_server' if args.chroma_server else ''}"
    merged = previous.get(key, {})  # a step run alone keeps the other steps' entries
    for name, value in result.items():
        old = merged.get(name)
        merged[name] = {**old, **value} if isinstance(old, dict) and name == "index_mb" else value
    previous[key] = merged
    args.out.write_text(json.dumps(previous, indent=1) + "\n")
    print(json.dumps(result, indent=1), file=sys.stderr)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
