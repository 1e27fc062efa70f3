"""Language-server latency through a real ``python -m mdsearch_ls serve`` process over stdio.

    python benchmarks/server_bench.py [VAULT] [--out FILE] [--big N]

Measures: process start -> ``initialize`` response; ``initialized`` -> ``mdsearch.status`` ready
(cold: fresh index dir; warm: second start on the same index); ``workspace/symbol`` and hover
latency p50/p95 while idle; and the same while the first index of a larger vault (N tldr pages)
runs, at a person's pace (``PACE_S`` between requests), and hovers over notes not yet indexed.
Prints and writes JSON (default ``benchmarks/results/server-<vault name>.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.stdio_client import StdioClient  # noqa: E402  (the one copy, shared with the tests)

DEFAULT_VAULT = REPO / "tests" / "fixtures" / "lsp-vault"
TLDR = REPO.parent / "shared" / "corpora" / "tldr" / "pages" / "common"
QUERIES = ["compress files into an archive", "list running processes", "copy files over ssh",
           "show disk usage", "search text in files", "change file permissions",
           "download a file from a url", "keep a wild yeast starter alive"]


PACE_S = 0.1
"""Between requests while the index runs (see :func:`latencies`)."""


def status(client: StdioClient) -> dict[str, Any]:
    return client.request("workspace/executeCommand",
                          {"command": "mdsearch.status", "arguments": []})


def start(vault: Path, cache: Path) -> tuple[StdioClient, float]:
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "ANONYMIZED_TELEMETRY": "False"}
    t0 = time.perf_counter()
    client = StdioClient([sys.executable, "-m", "mdsearch_ls", "serve"], env)
    client.request("initialize", {
        "processId": os.getpid(), "rootUri": vault.as_uri(),
        "workspaceFolders": [{"uri": vault.as_uri(), "name": vault.name}],
        "capabilities": {"window": {"workDoneProgress": True},
                         "workspace": {"symbol": {}, "executeCommand": {}}},
    })
    return client, time.perf_counter() - t0


def wait_ready(client: StdioClient, timeout: float = 1800) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    client.notify("initialized", {})
    while True:
        st = status(client)
        if st["state"] == "ready" and st["folders"] and all(
            f["state"] == "ready" for f in st["folders"]
        ):
            return time.perf_counter() - t0, st
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(st)
        time.sleep(0.05)  # polling interval


def pct(values: list[float]) -> dict[str, float]:
    ms = sorted(v * 1000 for v in values)
    if not ms:
        return {}
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 1), "p95_ms": round(p95, 1),
            "max_ms": round(ms[-1], 1)}


def latencies(client: StdioClient, vault: Path, rounds: int,
                    while_state: str | None = None, pace: float = 0.0) -> dict[str, Any]:
    """``pace``: seconds from one request's answer to the next one, a person's pace; while an
    index runs it makes every code sample the same seconds of it (back to back, a server that
    answers sooner is measured over a shorter, earlier stretch of the index)."""
    notes = sorted(vault.rglob("*.md"))
    sym: list[float] = []
    hov: list[float] = []
    for i in range(rounds):
        if while_state and (status(client))["state"] != while_state:
            break
        q = QUERIES[i % len(QUERIES)] + ("" if i < len(QUERIES) else f" {i}")
        t = time.perf_counter()
        client.request("workspace/symbol", {"query": q})
        sym.append(time.perf_counter() - t)
        time.sleep(pace)
        hov.append(hover_time(client, notes[i % len(notes)]))
        time.sleep(pace)
    return {"workspace_symbol": pct(sym), "hover": pct(hov)}


def hover_time(client: StdioClient, note: Path) -> float:
    """Seconds to the answer of a hover on the third line of ``note``."""
    t = time.perf_counter()
    client.request("textDocument/hover", {
        "textDocument": {"uri": note.as_uri()}, "position": {"line": 2, "character": 0}})
    return time.perf_counter() - t


def unindexed_hovers(client: StdioClient, vault: Path, rounds: int) -> dict[str, Any]:
    """Hovers over the largest notes while the index runs, at ``PACE_S``: small notes are
    indexed first, so these are not yet, and each hover embeds its section on the fly."""
    largest = sorted(vault.rglob("*.md"), key=lambda p: -p.stat().st_size)[:rounds]
    times: list[float] = []
    for note in largest:
        if status(client)["state"] != "indexing":
            break
        times.append(hover_time(client, note))
        time.sleep(PACE_S)
    return pct(times)


def run(args: argparse.Namespace) -> dict[str, Any]:
    vault = Path(args.vault).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="mdsearch-server-bench-"))
    out: dict[str, Any] = {
        "vault": str(vault), "files": len(list(vault.rglob("*.md"))),
        "python": platform.python_version(), "cpus": os.cpu_count(),
    }
    try:
        cache = tmp / "cache"
        client, init = start(vault, cache)
        ready, st = wait_ready(client)
        out["cold"] = {"initialize_s": round(init, 3), "ready_s": round(ready, 2),
                       "chunks": st["folders"][0]["chunks"]}
        out["idle"] = latencies(client, vault, args.rounds)
        client.stop()

        client, init = start(vault, cache)
        ready, st = wait_ready(client)
        out["warm"] = {"initialize_s": round(init, 3), "ready_s": round(ready, 2)}
        client.stop()

        if TLDR.is_dir() and args.big:
            big = tmp / "tldr"
            big.mkdir()
            for page in sorted(TLDR.glob("*.md"))[: args.big]:
                shutil.copy(page, big / page.name)
            client, init = start(big, tmp / "cache-big")
            t0 = time.perf_counter()
            client.notify("initialized", {})
            while True:  # wait until something is indexed, then measure while indexing runs
                st = status(client)
                if st["folders"] and st["folders"][0]["chunks"] > 0:
                    break
                time.sleep(0.1)
            during = latencies(client, big, args.rounds, while_state="indexing", pace=PACE_S)
            during["hover_not_yet_indexed"] = unindexed_hovers(client, big, args.rounds)
            st = status(client)
            during["still_indexing_after"] = st["state"] == "indexing"
            during["first_chunks_after_s"] = round(time.perf_counter() - t0, 2)
            out["while_indexing"] = {"files": args.big, **during}
            client.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("vault", nargs="?", default=str(DEFAULT_VAULT))
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--big", type=int, default=1000, help="tldr pages for 'while indexing'")
    args = ap.parse_args()
    result = run(args)
    text = json.dumps(result, indent=2)
    print(text)
    name = Path(args.vault).resolve().name
    path = Path(args.out) if args.out else REPO / "benchmarks" / "results" / f"server-{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
