"""Whole processes, as a person starts them: search, status, help, the server, indexing.

    python benchmarks/cli_bench.py [--corpus DIR] [--rounds 5] [--tldr DIR | --no-tldr]
                                   [--out FILE]

The corpus (default ``../shared/corpora/obsidian-help``) is copied to a temp dir and indexed once
with the default backend (``mdsearch index``: its wall time and peak RSS are reported). Then,
interleaved round by round, medians of wall time and of each process's peak RSS (``wait4``):

* ``search``: ``mdsearch search QUERY --root <indexed corpus>`` (hybrid, the default backend);
* ``search-torch``: the same with ``--embedder-backend torch`` (the same index: fp32 ONNX and torch
  share an embedding space);
* ``search-keyword``: ``--mode keyword``; ``status``; ``help`` (``mdsearch --help``);
* ``rg``: ``rg -il WORD`` over the same folder, for scale.

The queries rotate over a fixed list, so neither backend's query is cached. Then the language
server: from ``initialized`` to the first non-empty ``workspace/symbol`` answer on the indexed
corpus, and the server's RSS once idle (a fresh server per round). Then, once, ``mdsearch index``
of tldr (``--tldr``, default ``../shared/corpora/tldr``): wall time and peak RSS. Last, where the
import time of each command goes (``python -X importtime``, cumulative ms per top-level package).

Targets: search median under 1.0 s and >= 10x faster than the torch backend; a search process
under 250 MB; the server from ``initialized`` to its first symbol answer under 2 s and under
350 MB idle; ``mdsearch index`` of tldr under 500 MB.
Results: ``benchmarks/results/cli-<corpus>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.stdio_client import StdioClient  # noqa: E402  (the one copy, shared with the tests)

PYTHON = sys.executable
MDSEARCH = [PYTHON, "-m", "mdsearch_ls"]
QUERIES = [
    ("how do I embed an image in a note", "embed"),
    ("sync my vault between phone and laptop", "sync"),
    ("keyboard shortcut to open the command palette", "palette"),
    ("publish notes as a website", "publish"),
    ("link to a heading in another note", "heading"),
]


def as_installed() -> None:
    """Compile the package's bytecode, as pip does when it installs it. Without it a process
    started under ``PYTHONDONTWRITEBYTECODE`` (set on some machines, this one included) compiles
    every module of ours it imports, every time: 0.1 s of a 0.25 s ``status`` here."""
    import compileall

    compileall.compile_dir(str(ROOT / "mdsearch_ls"), quiet=1)


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, peak RSS MB, exit code) of one process."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, proc.returncode


def start_server(root: Path, env: dict[str, str], query: str, python: str = PYTHON
                 ) -> tuple[StdioClient, float]:
    """A language server on ``root`` and the seconds from ``initialized`` to its first
    non-empty ``workspace/symbol`` answer (it holds the index, or asks the process that does);
    ``python``: the interpreter that runs it (another checkout's). It starts in ``root``, as
    an editor starts it in the folder it opened (and so ``-m`` finds the package ``PYTHONPATH``
    names, not one in this process's folder)."""
    client = StdioClient([python, "-m", "mdsearch_ls", "serve"], env, cwd=root)
    try:
        client.request("initialize", {
            "processId": os.getpid(), "rootUri": root.as_uri(), "capabilities": {},
            "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
        })
        t = time.perf_counter()
        client.notify("initialized", {})
        while not client.request("workspace/symbol", {"query": query}):
            if time.perf_counter() - t > 300:
                raise TimeoutError("no workspace/symbol answer in 300 s")
        return client, time.perf_counter() - t
    except BaseException:
        client.stop()
        raise


def wait_idle(client: StdioClient, timeout: float = 300) -> None:
    """Until every folder of the server is ready with nothing queued (its first look done)."""
    deadline = time.perf_counter() + timeout
    while True:
        status = client.request("workspace/executeCommand",
                                {"command": "mdsearch.status", "arguments": []})
        folders = status.get("folders") or []
        if folders and all(f["state"] == "ready" and f.get("queue", 0) == 0 for f in folders):
            return
        if time.perf_counter() > deadline:
            raise TimeoutError(f"server not idle: {status}")
        threading.Event().wait(0.2)


def server_round(root: Path, env: dict[str, str], query: str) -> dict[str, float]:
    """First ``workspace/symbol`` answer after ``initialized`` and the idle RSS."""
    client, first = start_server(root, env, query)
    try:
        wait_idle(client)
        return {"first_symbols_s": first, "idle_rss_mb": client.rss_mb(),
                **{f"idle_rss_{kind}_mb": mb for kind, mb in client.rss_parts_mb().items()}}
    finally:
        client.stop()


HEAVY = ("chromadb", "numpy", "onnxruntime", "tokenizers", "pygls", "lsprotocol", "cattrs",
         "markdown_it", "yaml", "pathspec", "platformdirs", "tqdm", "sqlite3", "torch",
         "sentence_transformers", "transformers")


def import_profile(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Where a command's import time goes: the total, and the cumulative ms of each heavy
    package's own import line (a package imported inside another counts in both)."""
    t = time.perf_counter()
    run = subprocess.run([PYTHON, "-X", "importtime", "-m", "mdsearch_ls", *cmd],
                         capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    total = 0
    packages: dict[str, int] = {}
    for line in run.stderr.splitlines():
        if not line.startswith("import time:") or line.count("|") < 2:
            continue
        _, cumulative, name = line[len("import time:"):].split("|")
        if not cumulative.strip().isdigit():
            continue
        module = name.strip()
        if not name[1:].startswith(" "):  # top level of the process
            total += int(cumulative)
        if module in HEAVY and module not in packages:
            packages[module] = round(int(cumulative) / 1000)
    return {"wall_s": round(wall, 3), "imports_ms": round(total / 1000),
            "packages_ms": dict(sorted(packages.items(), key=lambda kv: -kv[1]))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path,
                    default=ROOT.parent / "shared" / "corpora" / "obsidian-help")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--server-rounds", type=int, default=3)
    ap.add_argument("--tldr", type=Path, default=ROOT.parent / "shared" / "corpora" / "tldr")
    ap.add_argument("--no-tldr", action="store_true")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch backend")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    as_installed()
    corpus = args.corpus.resolve()
    out = args.out or ROOT / "benchmarks" / "results" / f"cli-{corpus.name}.json"
    result: dict[str, Any] = {"corpus": corpus.name, "rounds": args.rounds}

    with tempfile.TemporaryDirectory(prefix="mdsearch-cli-bench-") as tmp:
        root = Path(tmp) / corpus.name
        shutil.copytree(corpus, root)
        env = {k: v for k, v in os.environ.items()
               if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
        env["MDSEARCH_CACHE_DIR"] = str(Path(tmp) / "cache")
        # each search in its own process, as without the background process a search starts
        env["MDSEARCH_BACKGROUND"] = "off"
        wall, rss, code = timed([*MDSEARCH, "index", str(root), "-q"], env)
        assert code == 0, "mdsearch index failed"
        result["index_corpus"] = {"wall_s": round(wall, 2), "peak_rss_mb": round(rss)}
        print(f"index {corpus.name}: {wall:.1f} s, peak RSS {rss:.0f} MB", file=sys.stderr)

        def commands(r: int) -> dict[str, list[str]]:
            query, word = QUERIES[r % len(QUERIES)]
            cmds = {
                "search": [*MDSEARCH, "search", query, "--root", str(root), "-q"],
                "search-torch": [*MDSEARCH, "search", query, "--root", str(root), "-q",
                                 "--embedder-backend", "torch"],
                "search-keyword": [*MDSEARCH, "search", query, "--root", str(root), "-q",
                                   "--mode", "keyword"],
                "status": [*MDSEARCH, "status", "--root", str(root)],
                "help": [*MDSEARCH, "--help"],
                "rg": ["rg", "-il", word, str(root)],
            }
            if args.no_torch:
                del cmds["search-torch"]
            return cmds

        runs: dict[str, list[tuple[float, float]]] = {}
        for r in range(args.rounds):
            cmds = commands(r)
            names = list(cmds)
            names = names[r % len(names):] + names[: r % len(names)]
            for name in names:
                wall, rss, code = timed(cmds[name], env)
                if name != "rg":
                    assert code == 0, (name, code)
                runs.setdefault(name, []).append((wall, rss))
                print(f"round {r + 1} {name:<15} {wall:6.2f} s  {rss:5.0f} MB", file=sys.stderr)
        summary = {
            name: {"median_s": round(statistics.median(w for w, _ in rs), 3),
                   "peak_rss_mb": round(statistics.median(m for _, m in rs))}
            for name, rs in runs.items()
        }
        result["processes"] = summary
        result["runs"] = runs
        ratios = {}
        if "search-torch" in summary:
            ratios["torch_search_over_onnx_search"] = round(
                summary["search-torch"]["median_s"] / summary["search"]["median_s"], 1)
        ratios["search_over_rg"] = round(summary["search"]["median_s"]
                                         / summary["rg"]["median_s"], 1)

        server = [server_round(root, env, QUERIES[r % len(QUERIES)][0])
                  for r in range(args.server_rounds)]
        result["server"] = {
            "first_symbols_s": round(statistics.median(s["first_symbols_s"] for s in server), 3),
            "idle_rss_mb": round(statistics.median(s["idle_rss_mb"] for s in server)),
            "runs": server,
        }
        print(f"server: first workspace/symbol {result['server']['first_symbols_s']:.2f} s "
              f"after initialized, idle RSS {result['server']['idle_rss_mb']} MB",
              file=sys.stderr)

        profiles = {}
        query = QUERIES[0][0]
        for name, cmd in {
            "help": ["--help"],
            "search-keyword": ["search", query, "--root", str(root), "--mode", "keyword", "-q"],
            "search-hybrid": ["search", query, "--root", str(root), "-q"],
            "status": ["status", "--root", str(root)],
        }.items():
            profiles[name] = import_profile(cmd, env)
        result["import_profile"] = profiles

        if not args.no_tldr and args.tldr.is_dir():
            tldr = Path(tmp) / "tldr"
            shutil.copytree(args.tldr, tldr)
            wall, rss, code = timed([*MDSEARCH, "index", str(tldr), "-q"], env)
            assert code == 0, "mdsearch index of tldr failed"
            result["index_tldr"] = {"wall_s": round(wall, 1), "peak_rss_mb": round(rss)}
            print(f"index tldr: {wall:.0f} s, peak RSS {rss:.0f} MB", file=sys.stderr)
    result["ratios"] = ratios
    result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                         "loadavg_end": os.getloadavg()}

    print(f"\n{corpus.name}: {args.rounds} rounds interleaved, medians; load "
          f"{os.getloadavg()[0]:.1f}")
    for k, v in ratios.items():
        print(f"  {k}: {v}")
    for name, s in summary.items():
        print(f"  {name:<15} {s['median_s']:7.3f} s  {s['peak_rss_mb']:5} MB")
    print(f"  server: first symbols {result['server']['first_symbols_s']} s, idle "
          f"{result['server']['idle_rss_mb']} MB")
    for k in ("index_corpus", "index_tldr"):
        if k in result:
            print(f"  {k}: {result[k]}")
    for name, p in result["import_profile"].items():
        print(f"  imports {name}: {p}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
