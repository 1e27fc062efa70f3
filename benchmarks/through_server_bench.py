"""A whole ``mdsearch search`` process while the background process (or an MCP server) holds the
index, at 8k and 96k chunks, this checkout's CLI against another's on the same server.

    python benchmarks/through_server_bench.py [--work DIR] [--rounds 40] [--warm 100]
                                              [--holder background|mcp] [--against DIR]
                                              [--out FILE]

The vaults are ``scale_bench.py``'s (``--work``, default ``/tmp/mdsearch-scale``: run it once
first; ``v8`` is tldr, about 8k chunks, ``v96`` twelve copies of it, about 96k). For each, this
checkout's ``mdsearch background`` (``--holder mcp``: an ``mdsearch mcp --root VAULT`` on
stdio, as an assistant starts it) is started and asked ``--warm`` nl2bash questions that none
of the timed ones is (a server a person uses has answered some, and keeps the scores of their
common words). Then, round by round (``--rounds``), the vaults in turn and, with ``--against``,
the other checkout's CLI (its package first on ``PYTHONPATH``, its bytecode compiled) right
beside this one's, each process a new nl2bash question exactly as typed, from the vault's
folder, the CLI's default k 5, text output to a pipe: wall and CPU (user + sys, ``wait4``).

Per CLI and vault: median and minimum wall, median CPU; the ratio of the 96k median to the 8k
one; with ``--against``, per vault, the median of the pairs' ratios this / that (which holds
when the machine's speed drifts). Results: ``benchmarks/results/through-server.json``.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"
PYTHON = sys.executable


def questions() -> list[str]:
    path = SHARED / "eval" / "nl2bash-tldr.jsonl"
    return [json.loads(line)["query"] for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """(wall s, CPU s, exit code) of one process, its output thrown away."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            cwd=cwd)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - t, usage.ru_utime + usage.ru_stime, \
        os.waitstatus_to_exitcode(status)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/mdsearch-scale"))
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--warm", type=int, default=100)
    ap.add_argument("--holder", choices=("background", "mcp"), default="background")
    ap.add_argument("--against", type=Path, default=None)
    ap.add_argument("--out", type=Path,
                    default=ROOT / "benchmarks" / "results" / "through-server.json")
    args = ap.parse_args(argv)
    work = args.work.resolve()
    vaults = {"v8": work / "v8", "v96": work / "v96"}
    if not all(v.is_dir() for v in vaults.values()):
        raise SystemExit(f"no vaults under {work}: run benchmarks/scale_bench.py first")
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(work / "cache"),
           "MDSEARCH_BACKGROUND": "off", "PYTHONPATH": str(ROOT)}
    sides = {"this": env}
    compileall.compile_dir(str(ROOT / "mdsearch_ls"), quiet=1)
    if args.against is not None:
        against = args.against.resolve()
        compileall.compile_dir(str(against / "mdsearch_ls"), quiet=1)
        sides["against"] = {**env, "PYTHONPATH": str(against)}
    qs = questions()
    warm, timed_qs = qs[:args.warm], qs[args.warm:]
    mdsearch = [PYTHON, "-m", "mdsearch_ls"]
    procs = {}
    runs: dict[str, dict[str, list[tuple[float, float, int]]]] = {}
    try:
        for name, vault in vaults.items():
            holder = (["background", str(vault)] if args.holder == "background"
                      else ["mcp", "--root", str(vault)])
            procs[name] = subprocess.Popen([*mdsearch, *holder], env=env,
                                           stdin=subprocess.PIPE if args.holder == "mcp"
                                           else None, stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 900
            while True:  # up: the CLI says it searched through it
                done = subprocess.run([*mdsearch, "search", "warm up", "-v"], cwd=vault,
                                      env=env, capture_output=True, text=True)
                if "searched through the mdsearch server" in done.stderr:
                    break
                if time.monotonic() > deadline or procs[name].poll() is not None:
                    raise SystemExit(f"the {args.holder} process of {name} did not answer")
            for q in warm:
                subprocess.run([*mdsearch, "search", q], cwd=vault, env=env,
                               capture_output=True, check=True)
        n = 0
        for r in range(args.rounds):
            order = list(vaults) if r % 2 == 0 else list(vaults)[::-1]
            for name in order:
                for side in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
                    q = timed_qs[n % len(timed_qs)]
                    n += 1
                    runs.setdefault(side, {}).setdefault(name, []).append(
                        timed([*mdsearch, "search", q], sides[side], vaults[name]))
    finally:
        from mdsearch_ls.config import Settings
        from mdsearch_ls.engine.api import index_dir_of

        os.environ["MDSEARCH_CACHE_DIR"] = env["MDSEARCH_CACHE_DIR"]
        for name, proc in procs.items():
            if args.holder == "background":
                ask_to_leave(index_dir_of(vaults[name], Settings()))
            else:
                proc.terminate()
            proc.wait(60)
    failed = sorted({f"{side}/{name}" for side, per in runs.items() for name, xs in per.items()
                     if any(x[2] != 0 for x in xs)})
    out: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load": os.getloadavg()},
        "rounds": args.rounds, "warm": args.warm, "k": 5, "holder": args.holder,
        "failed": failed,
        "sides": {side: e["PYTHONPATH"] for side, e in sides.items()},
    }
    for side, per in runs.items():
        row = {name: {"wall_ms": round(1000 * statistics.median(x[0] for x in xs), 1),
                      "wall_min_ms": round(1000 * min(x[0] for x in xs), 1),
                      "cpu_ms": round(1000 * statistics.median(x[1] for x in xs), 1)}
               for name, xs in per.items()}
        row["ratio_96_over_8"] = round(row["v96"]["wall_ms"] / row["v8"]["wall_ms"], 2)
        out[side] = row
    if "against" in runs:
        out["ratio_this_over_against"] = {
            name: round(statistics.median(a[0] / b[0] for a, b in zip(
                runs["this"][name], runs["against"][name], strict=True)), 3)
            for name in vaults}
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=1))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
