"""What the ``mdsearch`` process itself costs when a server that holds the index answers it.

    python benchmarks/client_startup_bench.py [--corpus DIR] [--rounds 30] [--against DIR]
                                              [--out FILE]

A search the background process (or a language or MCP server) answers loads no model, no numpy
and no index: what is left is the client, an interpreter that imports the CLI, parses its
arguments, asks the socket and prints. This times that process, as a person starts it.

The corpus (default ``../shared/corpora/obsidian-help``) is copied to a temp dir with a cache of
its own, indexed once (``mdsearch index``), and ``mdsearch background`` is started on it; the
rounds wait until a search says it was answered through the server. Then, interleaved round by
round (``--rounds``), each process's wall time and CPU time (user + sys, ``wait4``), medians:

* ``search``: ``mdsearch search QUERY`` from the vault's folder (text, k 5), answered by the
  background process (``MDSEARCH_BACKGROUND=off``, so no other one is started);
* ``search-paths``: the same with ``--format paths`` (no snippets to print);
* ``help``: ``mdsearch --help``;
* ``python``: ``python -c pass``, the floor of any Python process here.

``--against DIR``: the same commands with another checkout's package first on ``PYTHONPATH``
(its bytecode compiled first, as for this one), interleaved with this checkout's, and the ratio
this / that per command (medians of the ratios of the pairs, which holds when the machine's
speed drifts). Last, one through-server search per checkout: the modules it imported, and
their import time as ``-X importtime`` sees it.

Results: ``benchmarks/results/client-startup.json``.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
QUERIES = ["sync my notes", "embed an image in a note", "keyboard shortcut for the command "
           "palette", "publish notes as a website", "link to a heading in another note"]
THROUGH = "searched through the mdsearch server"


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """(wall s, CPU s, exit code) of one process, its output thrown away."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    return wall, usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def commands(query: str) -> dict[str, list[str]]:
    mdsearch = [PYTHON, "-m", "mdsearch_ls"]
    return {
        "search": [*mdsearch, "search", query],
        "search-paths": [*mdsearch, "search", query, "--format", "paths"],
        "help": [*mdsearch, "--help"],
        "python": [PYTHON, "-c", "pass"],
    }


MODULES = ("import json, sys\n"
           "before = set(sys.modules)\n"
           "from mdsearch_ls.cli import main\n"
           "code = main(sys.argv[1:])\n"
           "sys.stderr.write('MODULES ' + json.dumps(sorted(set(sys.modules) - before)) + '\\n')\n"
           "raise SystemExit(code)\n")


def imports(env: dict[str, str], cwd: Path) -> dict[str, Any]:
    """One through-server search: the modules it imported (``sys.modules``: ``-X importtime``
    does not see what ``importlib.import_module`` loads, which is how the engine's names load)
    and the import time ``-X importtime`` does see (top-level cumulative, ms)."""
    done = subprocess.run([PYTHON, "-c", MODULES, "search", QUERIES[0]], env=env, cwd=cwd,
                          capture_output=True, text=True, check=True)
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith("MODULES "))
    names = json.loads(line.removeprefix("MODULES "))
    timed = subprocess.run([PYTHON, "-X", "importtime", "-m", "mdsearch_ls", "search",
                            QUERIES[0]], env=env, cwd=cwd, capture_output=True, text=True,
                           check=True)
    rows = [ln.split("|") for ln in timed.stderr.splitlines() if ln.startswith("import time:")
            and "self [us]" not in ln]
    tops = [int(r[1]) for r in rows if not r[2].startswith("   ")]
    return {"modules": len(names), "importtime_ms": round(sum(tops) / 1000, 1),
            "mdsearch_modules": [n for n in names if n.startswith("mdsearch_ls")],
            "other_modules": [n for n in names if not n.startswith("mdsearch_ls")]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpora"
                    / "obsidian-help")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--against", type=Path, default=None,
                    help="another checkout (e.g. a git worktree of main) to compare with")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results"
                    / "client-startup.json")
    opts = ap.parse_args()
    sides = {"this": ROOT}
    if opts.against is not None:
        sides["against"] = opts.against.resolve()
    for path in sides.values():  # as pip installs it; else every run compiles every module
        compileall.compile_dir(str(path / "mdsearch_ls"), quiet=1)

    work = Path(tempfile.mkdtemp(prefix="mds-client-"))
    vault = Path(shutil.copytree(opts.corpus, work / "vault"))
    base_env = {**os.environ, "MDSEARCH_CACHE_DIR": str(work / "cache"), "COLUMNS": "100"}
    env = {side: {**base_env, "PYTHONPATH": str(path), "MDSEARCH_BACKGROUND": "off"}
           for side, path in sides.items()}
    background = None
    try:
        t = time.perf_counter()
        subprocess.run([PYTHON, "-m", "mdsearch_ls", "index", str(vault), "-q"],
                       env=env["this"], check=True)
        indexed_s = time.perf_counter() - t
        background = subprocess.Popen(
            [PYTHON, "-m", "mdsearch_ls", "background", str(vault)],
            env={**env["this"], "MDSEARCH_BACKGROUND": ""}, cwd=vault,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while True:  # until a search is answered through it (the model loads first)
            said = subprocess.run([PYTHON, "-m", "mdsearch_ls", "search", "x", "-v"],
                                  env=env["this"], cwd=vault, capture_output=True, text=True)
            if THROUGH in said.stderr:
                break
            if background.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the background process did not answer: " + said.stderr)
            time.sleep(1)

        times: dict[str, dict[str, list[tuple[float, float]]]] = {
            side: {name: [] for name in commands("")} for side in sides}
        failed: list[str] = []
        for n in range(opts.rounds + 1):  # the first round warms the page cache, not counted
            query = QUERIES[n % len(QUERIES)]
            for name, cmd in commands(query).items():
                for side in sides:
                    wall, cpu, code = run(cmd, env[side], vault)
                    if code != 0:
                        failed.append(f"{side} {name}: exit {code}")
                    if n:
                        times[side][name].append((wall, cpu))

        report: dict[str, Any] = {
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "load": os.getloadavg()},
            "corpus": opts.corpus.name, "indexed_s": round(indexed_s, 1),
            "rounds": opts.rounds, "failed": failed, "sides": {k: str(v) for k, v in
                                                               sides.items()},
            "commands": {}, "imports": {side: imports(env[side], vault) for side in sides},
        }
        for name in commands(""):
            row: dict[str, Any] = {}
            for side in sides:
                walls = [w for w, _ in times[side][name]]
                cpus = [c for _, c in times[side][name]]
                row[side] = {"wall_ms": round(statistics.median(walls) * 1000, 1),
                             "cpu_ms": round(statistics.median(cpus) * 1000, 1),
                             "wall_min_ms": round(min(walls) * 1000, 1)}
            if "against" in sides:
                ratios = [a[0] / b[0] for a, b in zip(times["this"][name],
                                                     times["against"][name], strict=True)]
                row["ratio_wall"] = round(statistics.median(ratios), 3)
            report["commands"][name] = row
    finally:
        if background is not None:
            background.terminate()
            background.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)

    print(f"{'command':14} " + "  ".join(f"{s + ' wall / cpu ms':>24}" for s in sides)
          + ("   this/against" if "against" in sides else ""))
    for name, row in report["commands"].items():
        cells = "  ".join(f"{row[s]['wall_ms']:>11.1f} / {row[s]['cpu_ms']:>9.1f}" for s in sides)
        print(f"{name:14} {cells}" + (f"   {row['ratio_wall']:.3f}" if "ratio_wall" in row
                                      else ""))
    for side, imp in report["imports"].items():
        print(f"imports ({side}): {imp['modules']} modules, {imp['importtime_ms']} ms seen by "
              f"-X importtime")
    if failed:
        print("failed:", *failed[:5], sep="\n  ")
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {opts.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
