"""What a search costs as a vault grows: tldr (8k chunks) against twelve copies of it (96k),
as a person meets it: whole processes, the process that holds the index, the language server.

    python benchmarks/scale_bench.py [--work DIR] [--copies 12] [--rounds 7] [--warm 20]
                                     [--queries 40] [--rest 30] [--out FILE]
                                     [--parts holder,first,in_process,server]

**The vaults** (built once under ``--work``, default ``/tmp/mdsearch-scale``, and reused): ``v8``
is tldr (``../shared/corpora/tldr/pages``, 7,425 notes, about 8k chunks) as ``v8/c01``; ``v96``
holds ``--copies`` copies of it (``c01`` ... ``c12``: about 96k chunks in 89k notes). Each vault
has a cache folder of its own (``cache-v8``, ``cache-v96``: ``MDSEARCH_CACHE_DIR``), so each has
its own background process and a holder's memory is one vault's. Only one copy is ever embedded:
the copies' sections embed the same text (a vector is keyed by the hash of what was embedded, and
a note's folder is not part of it), so the second index is seeded with the first one's cached
vectors (``vectors`` rows copied between the manifests: the benchmark's only reach into an index)
and ``mdsearch index`` then reads, chunks and stores every copy without the model. Both indexes
are made by the real ``mdsearch index``, with the real model.

The questions are nl2bash questions (``../shared/eval/nl2bash-tldr.jsonl``) exactly as typed,
a new one for every search (none answered before, so no answer and no query vector is reused);
whole processes run from the vault's folder, the two vaults in turn round by round, with the
CLI's default k 5; per command the median wall, CPU (user + sys) and peak RSS of the process
(``wait4``), and the 96k median over the 8k one. Parts (``--parts``; the others of an existing
``--out`` are kept):

* ``holder``: ``mdsearch background VAULT`` holds each index and has answered ``--warm`` other
  questions; then ``mdsearch search``, ``--mode keyword``, ``status``, a search right after a
  note was saved (the benchmark's own copy of ``c01/common/tar.md``, rewritten with one line
  more) and ``mdsearch index`` after it, every one answered by the holder. Then the holder's
  RSS right after the rounds and at rest (the lowest in ``--rest`` seconds without a request).
* ``first``: a search with nothing running: ``mdsearch search`` starts the background process
  and asks it (the process is stopped, and gone, before each such search); and the same search
  with ``MDSEARCH_BACKGROUND=off``, where the command holds the index for its own run.
* ``in_process``: hybrid search in the process that holds the index (``Workspace.search``,
  k=10): p50/p95 over ``--queries`` new questions, each list alone too (``semantic``,
  ``keyword``), and the first hit of the scale bar's question ("extract a tar archive into a
  specific directory") in both modes, its copy's folder left out so the two sizes compare.
* ``server``: a language server on the vault (it holds the index), and a second one beside it
  (``lsp_vs_bench.pair_round``): each one's first ``workspace/symbol`` answer after
  ``initialized``, the second's hover p50/p95 (answered through the first), both RSS.

The vector leg's recall against exact search is ``hnsw_bench.py``'s. Prints a summary and writes
JSON (default ``benchmarks/results/scale.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
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
from cli_bench import as_installed  # noqa: E402  (one copy of each)
from lsp_vs_bench import hover_sample, pair_round  # noqa: E402

# The engine is imported where it is used, not here: a child's peak RSS (wait4) starts at its
# parent's, since the pages it shares before exec count in it, so a parent that imported the
# engine (80 MB) would be the floor of every whole process measured (the layout alone: 20 MB,
# ``rss_floor_mb`` in the results; a whole CLI search through a holder is about 28 MB).

PYTHON = sys.executable
MDSEARCH = [PYTHON, "-m", "mdsearch_ls"]
SHARED = ROOT.parent / "shared"
TLDR = SHARED / "corpora" / "tldr" / "pages"
NL2BASH = SHARED / "eval" / "nl2bash-tldr.jsonl"
BAR_QUESTION = "extract a tar archive into a specific directory"
"""The scale bar's question (issue 55): its first hit must be the same at both sizes."""
PARTS = ("holder", "first", "in_process", "server")


def queries() -> list[str]:
    return [json.loads(line)["query"] for line in NL2BASH.read_text().splitlines() if line]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def cache_of(vault: Path) -> Path:
    return vault.parent / f"cache-{vault.name}"


def env_of(vault: Path, base: dict[str, str]) -> dict[str, str]:
    """The environment of every process of ``vault``: its own cache folder."""
    return {**base, "MDSEARCH_CACHE_DIR": str(cache_of(vault))}


def index_dir(vault: Path) -> Path:
    from mdsearch_ls.engine.index.layout import default_index_dir  # (see the imports above)

    return cache_of(vault) / "indexes" / default_index_dir(vault).name


def manifest_of(vault: Path) -> Path:
    from mdsearch_ls.config import Settings  # (see the imports above)
    from mdsearch_ls.engine.index.layout import space_name

    return index_dir(vault) / f"{space_name(Settings())}.sqlite3"


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """Wall s, CPU s (user+sys), peak RSS MB and stderr of one process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode() if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{cmd} exited {code}: {err[-2000:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024, "stderr": err}


def medians(runs: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, Any]:
    """Per command and vault the medians (and the wall's min and max), and the ratio."""
    out: dict[str, Any] = {}
    for cmd, per in runs.items():
        row: dict[str, Any] = {}
        for name, xs in per.items():
            row[name] = {k: round(statistics.median(x[k] for x in xs), 3)
                         for k in ("wall_s", "cpu_s", "rss_mb")}
            row[name]["wall_min_s"] = round(min(x["wall_s"] for x in xs), 3)
            row[name]["wall_max_s"] = round(max(x["wall_s"] for x in xs), 3)
        if "v8" in per and "v96" in per:
            row["ratio_wall_96_over_8"] = round(row["v96"]["wall_s"] / row["v8"]["wall_s"], 2)
        out[cmd] = row
    return out


def run_index(vault: Path, env: dict[str, str]) -> dict[str, Any]:
    stats = timed([*MDSEARCH, "index", str(vault), "--yes", "-q"], env_of(vault, env), vault)
    print(f"index {vault.name}: {stats['wall_s']:.0f} s, {stats['rss_mb']:.0f} MB peak",
          file=sys.stderr)
    return {k: round(v, 2) for k, v in stats.items() if k != "stderr"}


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


def counts(vault: Path) -> dict[str, int]:
    with sqlite3.connect(f"file:{manifest_of(vault)}?mode=ro", uri=True) as db:
        files = db.execute("SELECT count(*) FROM files").fetchone()[0]
        chunks = db.execute("SELECT count(*) FROM chunks").fetchone()[0]
    size = sum(p.stat().st_size for p in index_dir(vault).rglob("*") if p.is_file())
    return {"notes": files, "chunks": chunks, "index_mb": round(size / 2**20)}


def save(note: Path, line: str) -> None:
    """A save of the benchmark's own copy of a tldr page: the page as shipped plus ``line``, so
    the note saved is the same size in every vault and every run."""
    original = (TLDR / note.relative_to(note.parents[1])).read_text(encoding="utf-8")
    note.write_text(f"{original.rstrip()}\n\n{line}\n", encoding="utf-8")


def status_of(vault: Path, env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run([*MDSEARCH, "status", "--json"], cwd=vault, env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def pid_in(record: Path) -> int | None:
    """The pid a holder's record names (``holder.json``, ``background.json``), if any."""
    try:
        return int(json.loads(record.read_text(encoding="utf-8"))["pid"])
    except (OSError, ValueError, KeyError):
        return None


def rss_mb(pid: int, key: str = "VmRSS") -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return round(int(text.split(f"{key}:")[1].split()[0]) / 1024, 1)


def gone(pid: int, timeout: float = 120) -> None:
    """Wait until process ``pid`` has exited (its index let go)."""
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"process {pid} did not exit")
        time.sleep(0.05)  # (not our child: nothing to wait on)


def in_turn(vaults: dict[str, Path], r: int) -> list[tuple[str, Path]]:
    items = list(vaults.items())
    return items if r % 2 == 0 else items[::-1]


def holder(vaults: dict[str, Path], qs: list[str], warm: list[str], rounds: int, rest: float,
           env: dict[str, str]) -> dict[str, Any]:
    """The ``holder`` part (see the module docstring)."""
    procs: dict[str, subprocess.Popen[bytes]] = {}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    out: dict[str, Any] = {}
    try:
        for name, vault in vaults.items():
            venv = env_of(vault, env)
            procs[name] = subprocess.Popen([*MDSEARCH, "background", str(vault)], env=venv,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            t0, deadline = time.perf_counter(), time.monotonic() + 900
            while pid_in(index_dir(vault) / "holder.json") != procs[name].pid:
                if time.monotonic() > deadline or procs[name].poll() is not None:
                    raise SystemExit(f"the background process of {name} did not hold it")
                time.sleep(0.2)  # (a process we started: polling its record is the way in)
            while True:  # its first look at the notes done
                st = status_of(vault, venv)
                if st["state"] == "ready" and not st.get("queue"):
                    break
                time.sleep(0.2)
            out.setdefault("holder_up_s", {})[name] = round(time.perf_counter() - t0, 1)
            for q in warm:
                subprocess.run([*MDSEARCH, "search", q], cwd=vault, env=venv,
                               capture_output=True, check=True)
        n = 0
        for r in range(rounds):
            for name, vault in in_turn(vaults, r):
                venv = env_of(vault, env)
                q1, q2, q3 = qs[n], qs[n + 1], qs[n + 2]
                cmds = {"search": [*MDSEARCH, "search", q1],
                        "search-keyword": [*MDSEARCH, "search", q2, "--mode", "keyword"],
                        "status": [*MDSEARCH, "status"]}
                for cmd, argv in cmds.items():
                    runs.setdefault(cmd, {}).setdefault(name, []).append(
                        timed(argv, venv, vault))
                save(vault / "c01" / "common" / "tar.md",
                     f"- Round {r}: list what an archive holds:\n\n`tar tf path/to/x.tar`")
                runs.setdefault("search-after-save", {}).setdefault(name, []).append(
                    timed([*MDSEARCH, "search", q3], venv, vault))
                runs.setdefault("index", {}).setdefault(name, []).append(
                    timed([*MDSEARCH, "index", "-q"], venv, vault))
                print(f"round {r + 1} {name}: " + ", ".join(
                    f"{c} {runs[c][name][-1]['wall_s']:.3f} s" for c in runs), file=sys.stderr)
            n += 3
        out.update(medians(runs))
        for name, proc in procs.items():
            after = rss_mb(proc.pid)
            lowest, deadline = after, time.monotonic() + rest
            while time.monotonic() < deadline:
                time.sleep(1.0)
                lowest = min(lowest, rss_mb(proc.pid))
            out.setdefault("holder_rss_mb", {})[name] = {
                "after_rounds": after, "at_rest": lowest,
                "at_rest_anon": rss_mb(proc.pid, "RssAnon"),
                "at_rest_file": rss_mb(proc.pid, "RssFile")}
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
    return out


def first(vaults: dict[str, Path], qs: list[str], rounds: int, env: dict[str, str]
          ) -> dict[str, Any]:
    """The ``first`` part (see the module docstring)."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    n = 0
    for r in range(rounds):
        for name, vault in in_turn(vaults, r):
            venv = env_of(vault, env)
            on = {k: v for k, v in venv.items() if k != "MDSEARCH_BACKGROUND"}
            run = timed([*MDSEARCH, "search", qs[n]], on, vault)
            if "started a background process" not in run["stderr"]:
                raise SystemExit(f"no background process was started: {run['stderr'][-500:]}")
            runs.setdefault("search-starting-the-holder", {}).setdefault(name, []).append(run)
            pid = pid_in(cache_of(vault) / "background.json")
            if pid is None:
                raise SystemExit(f"no background process runs for {name}")
            os.kill(pid, signal.SIGTERM)  # (it exits on SIGTERM, its index closed)
            gone(pid)
            runs.setdefault("search-holding-it-itself", {}).setdefault(name, []).append(
                timed([*MDSEARCH, "search", qs[n + 1]], {**on, "MDSEARCH_BACKGROUND": "off"},
                      vault))
            print(f"round {r + 1} {name}: " + ", ".join(
                f"{c} {runs[c][name][-1]['wall_s']:.2f} s" for c in runs), file=sys.stderr)
        n += 2
    return medians(runs)


def first_hit(ws: Any, mode: str) -> str:
    """The scale bar's question's first hit, its copy's folder (``c01/``...) left out."""
    from mdsearch_ls.engine.api import SearchRequest  # (see the imports above)

    hits = ws.search(SearchRequest.build(BAR_QUESTION, k=10, mode=mode)).hits
    return hits[0].path.split("/", 1)[-1] if hits else ""


def in_process(vault: Path, qs: list[str], *, settings: Any = None,
               embedder: Any = None) -> dict[str, Any]:
    """The ``in_process`` part for one vault (see the module docstring), its index where
    ``MDSEARCH_CACHE_DIR`` says. ``million_bench.py`` passes its own ``settings`` and
    ``embedder`` (the real model for questions, under the stand-in's name its index was built
    with)."""
    from mdsearch_ls.config import Settings  # (see the imports above)
    from mdsearch_ls.engine.api import SearchRequest, create_embedder
    from mdsearch_ls.engine.workspace import Workspace

    settings = settings or Settings()
    embedder = embedder or create_embedder(settings)
    out: dict[str, Any] = {}
    with Workspace.open(vault, settings, embedder=embedder) as ws:
        t0 = time.perf_counter()
        ws.search(SearchRequest.build("warm up: load the model", k=10))
        out["first_search_s"] = round(time.perf_counter() - t0, 2)
        for mode in ("hybrid", "semantic", "keyword"):
            # No answer to an earlier question is reused, nor its query vector.
            ws.searcher._cache.clear()
            embedder._cache.clear()  # type: ignore[attr-defined]
            ms = []
            for q in qs:
                t0 = time.perf_counter()
                ws.search(SearchRequest.build(q, k=10, mode=mode))
                ms.append((time.perf_counter() - t0) * 1000)
            out[mode] = {"p50_ms": round(statistics.median(ms), 1),
                         "p95_ms": round(pct(ms, 0.95), 1), "n": len(ms)}
        out["bar_question_first_hit"] = {mode: first_hit(ws, mode)
                                         for mode in ("hybrid", "semantic")}
    return out


def server(vault: Path, env: dict[str, str]) -> dict[str, Any]:
    """The ``server`` part for one vault (see the module docstring)."""
    got = pair_round(vault, {**env_of(vault, env), "PYTHONPATH": str(ROOT)},
                     hover_sample(vault, 20))
    return {k: round(v, 3) for k, v in got.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/mdsearch-scale"))
    ap.add_argument("--copies", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--warm", type=int, default=20, help="questions a holder answers first")
    ap.add_argument("--queries", type=int, default=40, help="questions of the in-process part")
    ap.add_argument("--rest", type=float, default=30.0, help="seconds a holder rests")
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "scale.json")
    args = ap.parse_args(argv)
    as_installed()
    work = args.work.resolve()
    # a holder is only ever the one a part starts
    env = {**os.environ, "MDSEARCH_BACKGROUND": "off"}
    qs = queries()
    parts = [p for p in args.parts.split(",") if p]
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise SystemExit(f"unknown parts: {', '.join(sorted(unknown))}")
    old = json.loads(args.out.read_text(encoding="utf-8")) if args.out.exists() else {}
    kept = {k: v for k, v in old.items() if k in PARTS or k == "build"}
    result: dict[str, Any] = {**kept, "machine": {"cpus": os.cpu_count(),
                                                  "python": platform.python_version(),
                                                  "load_at_start": os.getloadavg()},
                              "k": {"whole_processes": 5, "in_process": 10},
                              "rounds": args.rounds, "parts_run": parts}
    result["build"] = build(work, args.copies, env) or kept.get("build", {})
    result["rss_floor_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    vaults = {"v8": work / "v8", "v96": work / "v96"}
    result["vaults"] = {name: counts(v) for name, v in vaults.items()}
    print(json.dumps(result["vaults"]), file=sys.stderr)
    # each part its own questions, none of them another's
    if "holder" in parts:
        result["holder"] = holder(vaults, qs[:3 * args.rounds], qs[200: 200 + args.warm],
                                  args.rounds, args.rest, env)
        result["holder"]["warm"] = args.warm
    if "first" in parts:
        result["first"] = first(vaults, qs[50: 50 + 2 * args.rounds], args.rounds, env)
    if "in_process" in parts:
        result["in_process"] = {}
        for name, v in vaults.items():
            os.environ["MDSEARCH_CACHE_DIR"] = str(cache_of(v))
            result["in_process"][name] = in_process(v, qs[100: 100 + args.queries])
    if "server" in parts:
        result["server"] = {name: server(v, env) for name, v in vaults.items()}
    result["load_at_end"] = os.getloadavg()
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: result.get(k) for k in parts}, indent=1))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
