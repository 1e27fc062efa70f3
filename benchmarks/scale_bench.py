"""What a search costs as a vault grows: 8k chunks against 96k, whole processes and in process,
and the vector layer alone at 100k and 1M.

    python benchmarks/scale_bench.py [--work DIR] [--copies 12] [--rounds 5] [--queries 40]
                                     [--synthetic 100000,1000000] [--skip-server] [--out FILE]
                                     [--parts processes,resident,background,in_process,server,
                                              vectors]

**The vaults** (built once under ``--work``, default ``/tmp/mdsearch-scale``, and reused): ``v8``
is tldr (``../shared/corpora/tldr/pages``, 7,425 notes, about 8k chunks) as ``v8/c01``; ``v96``
holds ``--copies`` copies of it (``c01`` ... ``c12``: about 96k chunks in 89k notes). Only one
copy is ever embedded: the copies' sections embed the same text (a vector is keyed by the hash of
what was embedded, and a note's folder is not part of it), so the second index is seeded with the
first one's cached vectors (``vectors`` rows copied between the manifests: the benchmark's only
reach into an index) and ``mdsearch index`` then reads, chunks and stores every copy without the
model. Both indexes are made by the real ``mdsearch index``, with the real model.

**Whole processes**, as a person starts them, from the vault's folder, the two vaults in turn
round by round (``--rounds``): ``mdsearch search QUERY`` (hybrid, the CLI's default k 5), ``--mode
keyword``, ``mdsearch status``, and a search right after a note was saved (a line appended to
one note of the copy first: the write path, which leaves Chroma behind), ``mdsearch index``
right after it (it catches Chroma up) and once more, with nothing left to do (the no-op index
of issue 26). Per command: median wall, median CPU (user+sys of
the process and its children) and median peak RSS (``wait4``), and the ratio of the 96k median
to the 8k median. The queries are nl2bash queries (``../shared/eval/nl2bash-tldr.jsonl``),
exactly as typed, a different one each round.

**Through a server**: the same ``mdsearch search`` while an ``mdsearch mcp`` server holds the
index (the CLI asks it through the socket beside the index), and that server's RSS once up.

**Through the background process** (part ``background``): the whole-process commands again while
``mdsearch background`` holds each vault's index (what a search starts by default; the rows
above run with ``MDSEARCH_BACKGROUND=off``): search, keyword search, the search right after a
save, ``index`` after it and the no-op ``index`` all ask it through its socket (``status`` reads
the index itself). And the background process's RSS after the rounds.

**In process**: ``search`` of ``--queries`` nl2bash queries (hybrid, k 10; each query new, so
neither the result cache nor the query vectors' answers), p50/p95 per vault: as a CLI search runs
it (``Workspace.open(vault, "read")``); as a server runs it (an open for writing, role
``server``) right after it read the index's common words (``warmed``: other questions, none
answered before, and the seconds the warm took); and after it has also answered 100 other
questions (``kept``).

**The language server**: from ``initialized`` to its first non-empty ``workspace/symbol`` answer
on the indexed vault, its RSS once its start-up scan is done (idle), and the lowest RSS in the
``REST_AFTER_S`` + 30 s after that (its writer releases the vector store when idle: rested).

**On disk**: the index folder's size per vault.

**The vector layer alone** (``--synthetic``): N vectors made from the real ones of ``v8``
(each a real vector plus Gaussian noise of the size of the spread between neighbours,
normalised), searched exactly as the engine's ``VectorTable`` does (one product, a partial sort)
by real query vectors (the model embeds the nl2bash queries): p50/p95 of a query, the seconds to
load the matrix and the process's peak RSS after it.

Prints a summary and writes JSON (default ``benchmarks/results/scale.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from cli_bench import as_installed, server_round  # noqa: E402  (one copy of each)

from mdsearch_ls.engine.service.folder import REST_AFTER_S  # noqa: E402

PYTHON = sys.executable
MDSEARCH = [PYTHON, "-m", "mdsearch_ls"]
SHARED = ROOT.parent / "shared"
TLDR = SHARED / "corpora" / "tldr" / "pages"
NL2BASH = SHARED / "eval" / "nl2bash-tldr.jsonl"


def queries() -> list[str]:
    return [json.loads(line)["query"] for line in NL2BASH.read_text().splitlines() if line]


def anon_mb() -> int:
    """This process's own memory (a server's kept rows among it), not the page cache of the
    files it maps (the vector snapshot), which every process shares."""
    return round(int(Path("/proc/self/status").read_text().split("RssAnon:")[1].split()[0])
                 / 1024)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> dict[str, float]:
    """Wall s, CPU s (user+sys) and peak RSS MB of one process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{cmd} exited {code}: {proc.stderr.read().decode()[-2000:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024}


def index_dir(vault: Path) -> Path:
    from mdsearch_ls.engine.index.layout import default_index_dir

    return default_index_dir(vault)


def manifest_of(vault: Path) -> Path:
    from mdsearch_ls.engine.api import create_embedder
    from mdsearch_ls.engine.workspace import Workspace    from mdsearch_ls.engine.index.layout import space_name

    return index_dir(vault) / f"{space_name(Settings())}.sqlite3"


def run_index(vault: Path, env: dict[str, str]) -> dict[str, float]:
    stats = timed([*MDSEARCH, "index", str(vault), "--yes", "-q"], env, vault)
    print(f"index {vault.name}: {stats['wall_s']:.0f} s, {stats['rss_mb']:.0f} MB peak",
          file=sys.stderr)
    return stats


def build(work: Path, copies: int, env: dict[str, str]) -> dict[str, Any]:
    """The two indexed vaults (reused when a manifest is there already)."""
    made: dict[str, Any] = {}
    v8, v96 = work / "v8", work / "v96"
    for vault, n in ((v8, 1), (v96, copies)):
        if manifest_of(vault).exists() and len(list(vault.iterdir())) == n:
            continue
        vault.mkdir(parents=True, exist_ok=True)
        if not (vault / "c01").exists():
            shutil.copytree(TLDR, vault / "c01")
        other = v96 if vault == v8 else v8
        if manifest_of(other).exists() and not manifest_of(vault).exists():
            # an index of one copy, then the other's vectors in its cache: no copy is embedded
            # twice (the first run makes the index folder and its manifest)
            seed = vault / "c01"
            parked = work / f"parked-{vault.name}"
            seed.rename(parked)
            (vault / "c01").mkdir()
            shutil.copy(parked / "common" / "ls.md", vault / "c01" / "ls.md")
            run_index(vault, env)
            shutil.rmtree(vault / "c01")
            parked.rename(seed)
            with sqlite3.connect(manifest_of(vault)) as db:
                db.execute("ATTACH ? AS other", (str(manifest_of(other)),))
                db.execute("INSERT OR IGNORE INTO vectors SELECT * FROM other.vectors")
        for i in range(2, n + 1):
            if not (vault / f"c{i:02d}").exists():
                shutil.copytree(TLDR, vault / f"c{i:02d}")
        made[vault.name] = run_index(vault, env)
    return made


def save(note: Path, line: str) -> None:
    """A save of the benchmark's own copy of a tldr page: the page as shipped plus ``line``, so
    the note saved is the same size in every vault and every run (appending, as the rounds once
    did, grew it to 16 KB and its re-parse and embedding with it)."""
    original = (TLDR / note.relative_to(note.parents[1])).read_text(encoding="utf-8")
    note.write_text(f"{original.rstrip()}\n\n{line}\n", encoding="utf-8")


def counts(vault: Path) -> dict[str, int]:
    with sqlite3.connect(f"file:{manifest_of(vault)}?mode=ro", uri=True) as db:
        files = db.execute("SELECT count(*) FROM files").fetchone()[0]
        chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
    size = sum(p.stat().st_size for p in index_dir(vault).rglob("*") if p.is_file())
    return {"notes": files, "chunks": chunks, "index_mb": round(size / 2**20)}


def processes(vaults: dict[str, Path], qs: list[str], rounds: int, env: dict[str, str]
              ) -> dict[str, Any]:
    runs: dict[str, dict[str, list[dict[str, float]]]] = {}
    for r in range(rounds):
        q = qs[r]
        order = list(vaults.items()) if r % 2 == 0 else list(vaults.items())[::-1]
        for name, vault in order:
            note = vault / "c01" / "common" / "tar.md"
            cmds = {
                "search": [*MDSEARCH, "search", q],
                "search-keyword": [*MDSEARCH, "search", q, "--mode", "keyword"],
                "status": [*MDSEARCH, "status"],
            }
            for cmd, argv in cmds.items():
                runs.setdefault(cmd, {}).setdefault(name, []).append(timed(argv, env, vault))
            save(note, f"- Round {r}: list what an archive holds:\n\n`tar tf path/to/x.tar`")
            runs.setdefault("search-after-save", {}).setdefault(name, []).append(
                timed([*MDSEARCH, "search", q], env, vault))
            # that search wrote its note without Chroma: the next index run catches it up;
            # the one after it finds nothing to do
            runs.setdefault("index-after-that", {}).setdefault(name, []).append(
                timed([*MDSEARCH, "index", "-q"], env, vault))
            runs.setdefault("index-no-op", {}).setdefault(name, []).append(
                timed([*MDSEARCH, "index", "-q"], env, vault))
            print(f"round {r + 1} {name}: " + ", ".join(
                f"{c} {runs[c][name][-1]['wall_s']:.2f} s" for c in runs), file=sys.stderr)
    out: dict[str, Any] = {}
    for cmd, per in runs.items():
        out[cmd] = {name: {k: round(statistics.median(x[k] for x in xs), 3)
                           for k in ("wall_s", "cpu_s", "rss_mb")} for name, xs in per.items()}
        if "v8" in per and "v96" in per:
            out[cmd]["ratio_wall_96_over_8"] = round(
                out[cmd]["v96"]["wall_s"] / out[cmd]["v8"]["wall_s"], 2)
    return out


OTHER_QUESTIONS = 20


def answer_others(vault: Path, env: dict[str, str]) -> None:
    """Ask a server that just came up ``OTHER_QUESTIONS`` questions none of the timed ones is
    (nl2bash 200-219): a server a person or an assistant uses has answered some, and keeps
    the scores of their common words (engine/index/phrase_scores.py)."""
    for q in queries()[200: 200 + OTHER_QUESTIONS]:
        subprocess.run([*MDSEARCH, "search", q], cwd=vault, env=env, capture_output=True,
                       check=True)


def resident(vaults: dict[str, Path], qs: list[str], rounds: int, env: dict[str, str]
             ) -> dict[str, Any]:
    """``mdsearch search`` while an ``mdsearch mcp`` server holds the index (the CLI asks it
    through its socket), the vaults in turn; and that server's RSS once its start is done."""
    

    servers = {}
    out: dict[str, Any] = {}
    try:
        for name, vault in vaults.items():
            proc = subprocess.Popen([*MDSEARCH, "mcp", "--root", str(vault)],
                                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, env=env)
            servers[name] = proc
            sock = resident_socket_path(index_dir(vault))
            deadline = time.monotonic() + 900
            while True:  # up: its socket answers a search (the CLI says where it searched)
                done = subprocess.run([*MDSEARCH, "search", "warm up", "-v"], cwd=vault,
                                      env=env, capture_output=True, text=True)
                if sock.exists() and "searched through the mdsearch server" in done.stderr:
                    break
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit(f"the server of {name} did not answer on its socket")
            answer_others(vault, env)
            rss = Path(f"/proc/{proc.pid}/status").read_text().split("VmRSS:")[1].split()[0]
            out.setdefault("server_rss_mb", {})[name] = round(int(rss) / 1024)
        runs: dict[str, list[dict[str, float]]] = {}
        for r in range(rounds):
            order = list(vaults.items()) if r % 2 == 0 else list(vaults.items())[::-1]
            for name, vault in order:
                runs.setdefault(name, []).append(
                    timed([*MDSEARCH, "search", qs[r]], env, vault))
        for name, xs in runs.items():
            out[name] = {k: round(statistics.median(x[k] for x in xs), 3)
                         for k in ("wall_s", "cpu_s", "rss_mb")}
        out["ratio_wall_96_over_8"] = round(out["v96"]["wall_s"] / out["v8"]["wall_s"], 2)
    finally:
        for proc in servers.values():
            proc.terminate()
            proc.wait(60)
    return out


def background(vaults: dict[str, Path], qs: list[str], rounds: int, env: dict[str, str]
               ) -> dict[str, Any]:
    """The commands of :func:`processes` while ``mdsearch background`` holds each index."""
    

    env = {**env, "MDSEARCH_BACKGROUND": ""}
    procs = {}
    try:
        for name, vault in vaults.items():
            procs[name] = subprocess.Popen([*MDSEARCH, "background", str(vault)],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                           env=env)
            deadline = time.monotonic() + 900
            while True:  # up: the CLI says it searched through it (a search before then must
                # not hand the vault to the other vault's process: one process per vault here)
                done = subprocess.run([*MDSEARCH, "search", "warm up", "-v"], cwd=vault,
                                      env={**env, "MDSEARCH_BACKGROUND": "off"},
                                      capture_output=True, text=True)
                if "searched through the mdsearch server" in done.stderr:
                    break
                if time.monotonic() > deadline or procs[name].poll() is not None:
                    raise SystemExit(f"the background process of {name} did not answer")
            answer_others(vault, env)
        out = processes(vaults, qs, rounds, env)
        out["background_rss_mb"] = {
            name: round(int(Path(f"/proc/{p.pid}/status").read_text()
                            .split("VmRSS:")[1].split()[0]) / 1024) for name, p in procs.items()}
        return out
    finally:
        for name, proc in procs.items():
            ask_to_leave(index_dir(vaults[name]))
            proc.wait(60)


def in_process(vault: Path, qs: list[str], warm: list[str], new: list[str],
               embedder: Any = None, settings: Any = None) -> dict[str, Any]:
    """Hybrid search in this process, k=10: as a CLI search runs it (``p50_ms``: a read-only
    open), and as a server runs it (an open for writing with the role ``server``, which keeps
    keyword scores: engine/index/phrase_scores.py): ``warmed_*`` once it has read the index's
    common words after its first search (``warm_s``, ``kept_rows``), for the ``new``
    questions, and ``kept_*`` once it has also answered the ``warm`` questions (none of them one
    of ``qs``). ``million_bench.py`` passes its own ``embedder`` (the real model for questions,
    under the stand-in's name its index was built with) and ``settings``."""
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.api import SearchRequest, create_embedder
    from mdsearch_ls.engine.workspace import Workspace

    settings = settings or Settings()
    embedder = embedder or create_embedder(settings)

    def run(ws: Workspace, questions: list[str]) -> list[float]:
        # No answer to an earlier question is reused, nor its query vector: a question a
        # server has not met costs its embedding too.
        ws.searcher._cache.clear()
        embedder._cache.clear()  # type: ignore[attr-defined]
        ms = []
        for q in questions:
            t0 = time.perf_counter()
            ws.search(SearchRequest.build(q, k=10))
            ms.append((time.perf_counter() - t0) * 1000)
        return ms

    ws = Workspace.open(vault, settings, "read", embedder=embedder)
    try:
        t0 = time.perf_counter()
        ws.search(SearchRequest.build("warm up: load the model and the tables", k=10))
        first = time.perf_counter() - t0
        ms = run(ws, qs)
    finally:
        ws.close()
    ws = Workspace.open(vault, settings, embedder=embedder, role="server")
    try:
        kept_scores = ws.manifest.phrase_scores
        assert kept_scores is not None
        t0 = time.perf_counter()
        ws.search(SearchRequest.build(warm[0], k=10))
        kept_scores.settle()
        warm_s, kept_rows = time.perf_counter() - t0, kept_scores.held
        warmed = run(ws, new)
        for q in warm[1:]:
            ws.search(SearchRequest.build(q, k=10))
        kept_scores.settle()
        kept = run(ws, qs)
        anon = anon_mb()
    finally:
        ws.close()
    return {"first_search_s": round(first, 2), "p50_ms": round(statistics.median(ms), 1),
            "p95_ms": round(pct(ms, 0.95), 1), "n": len(ms),
            "warm_s": round(warm_s, 2), "kept_rows": kept_rows,
            "warmed_p50_ms": round(statistics.median(warmed), 1),
            "warmed_p95_ms": round(pct(warmed, 0.95), 1), "warmed_n": len(warmed),
            "kept_p50_ms": round(statistics.median(kept), 1),
            "kept_p95_ms": round(pct(kept, 0.95), 1), "kept_after_questions": len(warm),
            "server_anon_mb": anon}


def synthetic(vault: Path, sizes: list[int], qs: list[str]) -> dict[str, Any]:
    """The exact product of the engine's VectorTable over N perturbed real vectors."""
    import numpy as np

    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.api import Workspace, create_embedder

    with sqlite3.connect(f"file:{manifest_of(vault)}?mode=ro", uri=True) as db:
        real = np.stack([np.frombuffer(b, dtype=np.float32)
                         for (b,) in db.execute("SELECT vector FROM vectors")])
    ws = Workspace.open(vault, Settings(), "read", embedder=create_embedder(Settings()))
    try:
        embedder = ws.embedder
        qvecs = np.stack([embedder.embed_query(q) for q in qs]).astype(np.float32)
    finally:
        ws.close()
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    for n in sizes:
        t0 = time.perf_counter()
        matrix = np.empty((n, real.shape[1]), dtype=np.float32)
        for start in range(0, n, 50_000):
            stop = min(n, start + 50_000)
            block = real[rng.integers(0, len(real), stop - start)]
            block = block + rng.normal(0, 0.03, block.shape).astype(np.float32)
            matrix[start:stop] = block / np.linalg.norm(block, axis=1, keepdims=True)
        made = time.perf_counter() - t0
        ms = []
        for q in qvecs:
            t0 = time.perf_counter()
            sims = matrix @ q
            top = np.argpartition(-sims, 59)[:60]
            top[np.argsort(-sims[top])]
            ms.append((time.perf_counter() - t0) * 1000)
        out[str(n)] = {"exact_p50_ms": round(statistics.median(ms), 2),
                       "exact_p95_ms": round(pct(ms, 0.95), 2), "make_s": round(made, 1),
                       "matrix_mb": round(matrix.nbytes / 2**20),
                       "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                            / 1024)}
        print(f"vectors {n}: exact p50 {out[str(n)]['exact_p50_ms']} ms, "
              f"matrix {out[str(n)]['matrix_mb']} MB", file=sys.stderr)
        del matrix
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/mdsearch-scale"))
    ap.add_argument("--copies", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--synthetic", default="100000,1000000")
    ap.add_argument("--skip-server", action="store_true")
    ap.add_argument("--parts", default="processes,resident,background,in_process,server,vectors",
                    help="what to measure; the other parts of an existing --out are kept")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "scale.json")
    args = ap.parse_args(argv)
    as_installed()
    work = args.work.resolve()
    # every row but the background part's runs each search in its own process
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(work / "cache"), "MDSEARCH_BACKGROUND": "off"}
    os.environ["MDSEARCH_CACHE_DIR"] = env["MDSEARCH_CACHE_DIR"]
    qs = queries()
    parts = set(args.parts.split(","))
    kept = (json.loads(args.out.read_text(encoding="utf-8"))
            if parts != {"processes", "resident", "background", "in_process", "server",
                         "vectors"}
            and args.out.exists() else {})
    result: dict[str, Any] = {**kept, "machine": {"cpus": os.cpu_count(),
                                                  "python": platform.python_version(),
                                                  "load_at_start": os.getloadavg()[0]},
                              "k": {"whole_processes": 5, "in_process": 10},
                              "rounds": args.rounds, "parts": sorted(parts)}
    result["build"] = build(work, args.copies, env)
    vaults = {"v8": work / "v8", "v96": work / "v96"}
    result["vaults"] = {name: counts(v) for name, v in vaults.items()}
    print(json.dumps(result["vaults"]), file=sys.stderr)
    if "processes" in parts:
        result["processes"] = processes(vaults, qs[: args.rounds], args.rounds, env)
    if "resident" in parts:
        result["search_through_a_server"] = resident(vaults, qs[50: 50 + args.rounds],
                                                     args.rounds, env)
    if "background" in parts:
        result["through_the_background_process"] = background(
            vaults, qs[300: 300 + args.rounds], args.rounds, env)
    if "in_process" in parts:
        result["in_process"] = {name: in_process(v, qs[100: 100 + args.queries], qs[:100],
                                                 qs[-args.queries:])
                                for name, v in vaults.items()}
    if "server" in parts and not args.skip_server:
        result["server"] = {name: server_round(v, env, "tar", rest_s=REST_AFTER_S + 30,
                                               searches=qs[280:285])
                            for name, v in vaults.items()}
    sizes = [int(x) for x in args.synthetic.split(",") if x]
    if "vectors" in parts and sizes:
        result["vectors"] = synthetic(vaults["v8"], sizes, qs[200: 200 + args.queries])
    result["load_at_end"] = os.getloadavg()[0]
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: result.get(k) for k in ("processes", "search_through_a_server",
                                                 "through_the_background_process",
                                                 "in_process")}, indent=1))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
