"""What a release weighs and how long each way in takes: artifacts, installs, the Quick start.

    python benchmarks/install_bench.py [--rounds 3] [--no-quick-start] [--out FILE]

Reads the artifacts ``scripts/dist.sh`` left in ``dist/`` (build them first) and reports:

* each artifact's size (the wheels, the sdist, the model's wheel, the .vsix, the Obsidian zip and
  assets) and the wheelhouse's (every dependency for this Python);
* each install path from ``dist/wheelhouse`` with ``--no-index`` (offline): a virtual
  environment's pip, pipx (its pip backend), ``uv tool install`` and ``uvx`` (``uv tool run``,
  whose time includes the search it runs): the install's wall time, the environment's size, and
  the first search on the bundled vault (the Quick start's query: index, then answer). Rounds
  run the paths in turn, each with a fresh home, tool folders and uv cache; medians reported;
* the README's Quick start, once, in a fresh clone of this checkout: the first line
  (``./scripts/setup.sh && .venv/bin/mdsearch search ...``), its wall time and ``.venv``'s size.
  pip's cache is this machine's (downloads of packages already fetched are not timed).

Results: ``benchmarks/results/install.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
WHEELHOUSE = DIST / "wheelhouse"
PYTHON = sys.executable
QUERY = "what do we do when more than 5% of requests fail"


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def clean_env(home: Path) -> dict[str, str]:
    drop = ("PIP_", "UV_", "PIPX_", "XDG_", "MDSEARCH_", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update(HOME=str(home), PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1",
               UV_PYTHON_DOWNLOADS="never", MDSEARCH_BACKGROUND="off")
    return env


def timed(cmd: list[Any], env: dict[str, str], cwd: Path = ROOT) -> float:
    start = time.perf_counter()
    done = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{cmd} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return took


def uv() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def one_path(name: str, tmp: Path) -> dict[str, float]:
    """Install by one path into ``tmp``, then the first search; seconds and bytes."""
    home = tmp / "home"
    home.mkdir()
    env = clean_env(home)
    search = ["search", QUERY, "--root", "examples/vault"]
    links = ["--no-index", "--find-links", WHEELHOUSE]
    if name == "pip":
        took = timed([PYTHON, "-m", "venv", tmp / "venv"], env)
        took += timed([tmp / "venv/bin/python", "-m", "pip", "install", *links, "mdsearch-ls"],
                      env)
        env_dir, mdsearch = tmp / "venv", [tmp / "venv/bin/mdsearch"]
    elif name == "pipx":
        env.update(PIPX_HOME=str(tmp / "pipx"), PIPX_BIN_DIR=str(tmp / "bin"))
        took = timed([PYTHON, "-m", "pipx", "install", "--backend", "pip", "--python", PYTHON,
                      f"--pip-args=--no-index --find-links {WHEELHOUSE}", "mdsearch-ls"], env)
        env_dir, mdsearch = tmp / "pipx", [tmp / "bin/mdsearch"]
    elif name == "uv tool":
        env.update(UV_TOOL_DIR=str(tmp / "tools"), UV_TOOL_BIN_DIR=str(tmp / "bin"),
                   UV_CACHE_DIR=str(tmp / "uv-cache"))
        took = timed([uv(), "tool", "install", "--offline", *links, "--python", PYTHON,
                      "mdsearch-ls"], env)
        env_dir, mdsearch = tmp / "tools", [tmp / "bin/mdsearch"]
    else:  # uvx: the install and the first search are one command
        env["UV_CACHE_DIR"] = str(tmp / "uv-cache")
        took = timed([uv(), "tool", "run", "--offline", *links, "--python", PYTHON,
                      "mdsearch-ls", *search], env)
        return {"install_and_first_search_s": took, "cache_bytes": size(tmp / "uv-cache")}
    first = timed([*mdsearch, *search], env)
    return {"install_s": took, "env_bytes": size(env_dir), "first_search_s": first}


def quick_start() -> dict[str, Any]:
    """The README's first Quick start line in a fresh clone of HEAD."""
    text = (ROOT / "README.md").read_text("utf-8")
    m = re.search(r"^#+\s*Quick start[^\n]*\n(.*?)^```[^\n]*\n(.*?)^```", text, re.S | re.M | re.I)
    assert m, "README has no Quick start block"
    line = next(x for x in m.group(2).splitlines() if x.strip() and not x.startswith("#"))
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "mdsearch"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("VIRTUAL_ENV")}
        env["MDSEARCH_BACKGROUND"] = "off"
        took = timed(["bash", "-c", line], env, cwd=clone)
        return {"line": line, "wall_s": took, "venv_bytes": size(clone / ".venv")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-quick-start", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "install.json")
    args = ap.parse_args()
    if not WHEELHOUSE.is_dir():
        raise SystemExit("no dist/wheelhouse: run scripts/dist.sh first")
    artifacts = {p.name: size(p) for p in sorted(DIST.iterdir())
                 if p.is_file() and p.suffix in (".whl", ".gz", ".vsix", ".zip")}
    artifacts.update({f"obsidian/{p.name}": size(p) for p in sorted((DIST / "obsidian").glob("*"))})
    artifacts["wheelhouse/"] = size(WHEELHOUSE)
    for name, n in artifacts.items():
        print(f"{n / 1e6:10.2f} MB  {name}")
    paths = ("pip", "pipx", "uv tool", "uvx")
    runs: dict[str, list[dict[str, float]]] = {p: [] for p in paths}
    for r in range(args.rounds):
        for name in paths:
            with tempfile.TemporaryDirectory() as tmp:
                runs[name].append(one_path(name, Path(tmp)))
            print(f"round {r + 1} {name}: {runs[name][-1]}", flush=True)
    installs = {name: {key: statistics.median(run[key] for run in results)
                       for key in results[0]} for name, results in runs.items()}
    out: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_at_end": os.getloadavg()},
        "rounds": args.rounds, "artifacts_bytes": artifacts, "installs_median": installs,
        "installs_runs": runs,
    }
    if not args.no_quick_start:
        out["quick_start"] = quick_start()
        print(f"quick start: {out['quick_start']}")
    out["machine"]["load_avg_at_end"] = os.getloadavg()
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    for name, medians in installs.items():
        print(f"{name:8s} " + "  ".join(f"{k} {v:.1f}" if k.endswith("_s") else
                                        f"{k} {v / 1e6:.0f} MB" for k, v in medians.items()))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
