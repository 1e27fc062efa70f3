"""What the freshness look's stat walk costs, and what no walker can do better than.

    python benchmarks/walk_floor.py [--work DIR] [--rounds 7] [--out FILE]

With nothing holding an index (``MDSEARCH_BACKGROUND=off``), a search must learn whether any
note changed since the index was written, including an edit made while nothing ran. An edit in
place changes only the file's own inode (not its folder's mtime), so the look stats every note
(``freshness.WalkBeside`` does it in a child process, beside the model's load). This measures,
on ``scale_bench.py``'s vaults (``--work``, default ``/tmp/mdsearch-scale``: ``v8``, tldr's 7,425
notes; ``v96``, twelve copies, 89,100 notes), the two in turn round by round, warm page cache:

- ``stat_scan``: the look's walk in this process, as the child runs it (wall, user and sys
  seconds);
- ``native_stat``: the same notes listed and stat-ed by a program in C (GNU ``find -name '*.md'
  -printf '%P %T@ %s'``), a whole process: a floor for any walker, since its system time is the
  kernel's own cost of a stat;
- ``native_list``: the same ``find`` listing names only, no stat.

Both walkers must find the same notes (checked: the count of each). Prints a summary and writes
JSON (default ``benchmarks/results/walk-floor.json``).
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
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mdsearch_ls.engine.index.freshness import _stats  # noqa: E402  (the look's own walk)

from mdsearch_ls.config import Settings  # noqa: E402


def in_process(vault: Path) -> tuple[dict[str, float], int]:
    """The look's walk, as the child runs it (no index folder inside these vaults)."""
    t, before = time.perf_counter(), os.times()
    found = _stats(vault, Settings(), None)
    after = os.times()
    return ({"wall_s": time.perf_counter() - t, "user_s": after.user - before.user,
             "sys_s": after.system - before.system}, len(found))


def native(vault: Path, stat: bool) -> tuple[dict[str, float], int]:
    """``find`` as a whole process: wall, and its user and sys seconds from ``wait4``."""
    cmd = ["find", ".", "-name", "*.md", "-type", "f"]
    cmd += ["-printf", "%P\\0%T@\\0%s\\0"] if stat else ["-print0"]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=vault, stdout=subprocess.PIPE)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed in {vault}")
    return ({"wall_s": wall, "user_s": usage.ru_utime, "sys_s": usage.ru_stime},
            out.count(b"\0") // (3 if stat else 1))


def gnu_find() -> bool:
    if shutil.which("find") is None:
        return False
    probe = subprocess.run(["find", ".", "-maxdepth", "0", "-printf", "%s"],
                           capture_output=True, check=False)
    return probe.returncode == 0 and probe.stdout.isdigit()


def medians(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(r[key] for r in runs), 3) for key in runs[0]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/mdsearch-scale"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                    "walk-floor.json")
    args = ap.parse_args(argv)
    vaults = {name: args.work / name for name in ("v8", "v96")}
    missing = [str(v) for v in vaults.values() if not v.is_dir()]
    if missing:
        raise SystemExit(f"no vault at {', '.join(missing)}: run benchmarks/scale_bench.py first")
    kinds = ["stat_scan"] + (["native_stat", "native_list"] if gnu_find() else [])
    runs: dict[str, dict[str, list[dict[str, float]]]] = {k: {n: [] for n in vaults}
                                                         for k in kinds}
    counts: dict[str, dict[str, int]] = {k: {} for k in kinds}
    for rnd in range(args.rounds + 1):  # the first round warms the page cache, untimed
        for name, vault in vaults.items():
            for kind in kinds:
                stats, n = (in_process(vault) if kind == "stat_scan"
                            else native(vault, stat=kind == "native_stat"))
                counts[kind][name] = n
                if rnd:
                    runs[kind][name].append(stats)
    result: dict[str, Any] = {"machine": {"cpus": os.cpu_count(),
                                          "python": platform.python_version(),
                                          "load_at_start": os.getloadavg()[0]},
                              "rounds": args.rounds, "notes": counts}
    for kind in kinds:
        if counts[kind] != counts["stat_scan"]:
            raise SystemExit(f"{kind} found {counts[kind]} notes, the look's walk "
                             f"{counts['stat_scan']}")
        result[kind] = {name: medians(r) for name, r in runs[kind].items()}
        v8, v96 = result[kind]["v8"], result[kind]["v96"]
        print(f"{kind}: 8k {v8['wall_s']:.3f} s (user {v8['user_s']:.3f}, sys {v8['sys_s']:.3f})"
              f"; 96k {v96['wall_s']:.3f} s (user {v96['user_s']:.3f}, sys {v96['sys_s']:.3f})")
    result["load_at_end"] = os.getloadavg()[0]
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
