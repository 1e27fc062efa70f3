"""A team's server under load: a search through ``mdsearch mcp --http`` with 1, 8 and 32 clients
at once, beside the same queries in process.

    python benchmarks/mcp_http_bench.py [VAULT] [--queries Q.jsonl] [-k 8] [--work DIR]
                                        [--levels 1,8,32] [--out FILE]

A real ``mdsearch mcp --root VAULT --http 127.0.0.1:0 --token-file F`` process (default VAULT
../shared/corpora/obsidian-help, its labelled queries as typed) is driven by the MCP SDK's own
streamable HTTP client, as an assistant drives it: each client opens one session and calls
``search_markdown`` (``limit`` k, default ``max_tokens``) for its share of the queries, all
clients at once. Every query is asked once in the whole run, so no answer comes from the
server's result cache or its query-vector cache: each level takes its own slice of the queries
(with 184 queries: 24 for one client, 8 each for 8, 3 each for 32).

Reported per level: p50/p95/max of a call (sent to answered, on the client), the level's wall
time and calls per second. Then, in this process, the same engine search of the one-client
slice on the same index, held here once the server has exited (``Workspace.search`` with the
server's k, each query new to it): the cost of the search itself, so the rest is HTTP, the SDK
and the answer's rendering. Prints a summary and writes JSON (default
``benchmarks/results/mcp-http-<vault>.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx2  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

PYTHON = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv").exists() else sys.executable
SHARED = REPO.parent / "shared"
DEFAULT_VAULT = SHARED / "corpora" / "obsidian-help"
DEFAULT_QUERIES = REPO / "benchmarks" / "queries" / "obsidian-help.jsonl"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(ms: list[float]) -> dict[str, float]:
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 1),
            "p95_ms": round(pct(ms, 0.95), 1), "max_ms": round(max(ms), 1)}


class Server:
    """``mdsearch mcp --http 127.0.0.1:0`` on VAULT, and the URL it printed."""

    def __init__(self, vault: Path, cache: Path, tokens: Path) -> None:
        env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache)}
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "mdsearch_ls", "mcp", "--root", str(vault), "--http", "127.0.0.1:0",
             "--token-file", str(tokens)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env=env)
        self.url = ""
        self._seen = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._seen.wait(300):
            self.stop()
            raise SystemExit("the server printed no 'serving' line")

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if "serving http://" in line and not self.url:
                self.url = line.split("serving ", 1)[1].split()[0]
                self._seen.set()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


refused: list[str] = []
"""Queries the tool answered with an error (a filter and no words): reported by name."""


async def client(url: str, token: str, queries: list[str], k: int, ready: list[int],
                 everyone: int, go: asyncio.Event) -> list[float]:
    """One assistant: a session, then its queries one after another; each call's milliseconds.
    The clock starts when every client's session is open (``go``), so a level times searches,
    not session set-up."""
    out = []
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=600) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        ready.append(1)
        if len(ready) == everyone:
            go.set()
        await go.wait()
        for q in queries:
            t0 = time.perf_counter()
            res = await session.call_tool("search_markdown", {"query": q, "limit": k})
            out.append((time.perf_counter() - t0) * 1000)
            if res.is_error:  # a query the tool refuses is answered too: counted, kept
                refused.append(q)
    return out


async def level(url: str, token: str, slices: list[list[str]], k: int
                ) -> tuple[list[float], float]:
    """All clients at once; every call's milliseconds and the wall time from the start signal."""
    go = asyncio.Event()
    ready: list[int] = []
    tasks = [asyncio.create_task(client(url, token, s, k, ready, len(slices), go))
             for s in slices]
    await go.wait()
    t0 = time.perf_counter()
    results = await asyncio.gather(*tasks)
    return [ms for r in results for ms in r], time.perf_counter() - t0


async def status(url: str, token: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=600) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        res = await session.call_tool("index_status", {})
        return dict(res.structured_content or {})


def in_process(vault: Path, cache: Path, queries: list[str], k: int) -> dict[str, Any]:
    """The engine's own search of the same queries on the same index, held in this process
    once the server has exited."""
    os.environ["MDSEARCH_CACHE_DIR"] = str(cache)
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.api import SearchRequest, create_embedder
    from mdsearch_ls.engine.workspace import Workspace

    ws = Workspace.open(vault, Settings(), embedder=create_embedder(Settings()))
    try:
        ws.search(SearchRequest.build("warm the model up", k=k))
        ms = []
        for q in queries:
            request = SearchRequest.build(q, k=k)
            t0 = time.perf_counter()
            ws.search(request)  # a query of filters alone: an empty answer, timed all the same
            ms.append((time.perf_counter() - t0) * 1000)
        return summary(ms)
    finally:
        ws.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault", nargs="?", type=Path, default=DEFAULT_VAULT)
    ap.add_argument("--queries", type=Path, default=DEFAULT_QUERIES)
    ap.add_argument("-k", type=int, default=8, help="limit of each search (the tool's default)")
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--work", type=Path, help="a folder to keep the vault's copy and its index "
                    "in between runs (default: a temporary one, removed after)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    queries = [json.loads(line)["query"] for line in args.queries.read_text().splitlines()
               if line.strip()]
    per_client = {1: 24, 8: 8, 32: 3}
    need = sum(n * per_client.get(n, 3) for n in levels)
    if need > len(queries):
        raise SystemExit(f"{need} distinct queries needed, {len(queries)} given")

    tmp = args.work or Path(tempfile.mkdtemp(prefix="mcp-http-bench-"))
    cache = tmp / "cache"
    vault = tmp / args.vault.name
    if not vault.exists():
        shutil.copytree(args.vault, vault)
    token = secrets.token_urlsafe(24)
    tokens = tmp / "tokens"
    tokens.write_text(f"bench {token}\n", encoding="utf-8")
    server = Server(vault, cache, tokens)
    report: dict[str, Any] = {"vault": args.vault.name, "k": args.k, "machine": {
        "cpus": os.cpu_count(), "python": platform.python_version(),
        "load": os.getloadavg()[0]}, "levels": {}}
    try:
        t0 = time.monotonic()
        while True:  # ready: the first index done and the model loaded
            st = asyncio.run(status(server.url, token))
            if st["index"]["state"] == "ready" and st["model"]["state"] == "loaded":
                break
            if time.monotonic() - t0 > 1800:
                raise SystemExit(f"not ready after 30 min: {st}")
            time.sleep(1)
        report["chunks"] = st.get("chunks") or st["index"].get("chunks")
        at = 0
        first_slice: list[str] = []
        for n in levels:
            each = per_client.get(n, 3)
            slices = [queries[at + i * each: at + (i + 1) * each] for i in range(n)]
            at += n * each
            if n == 1:
                first_slice = slices[0]
            ms, wall = asyncio.run(level(server.url, token, slices, args.k))
            report["levels"][str(n)] = {**summary(ms), "clients": n, "wall_s": round(wall, 2),
                                        "calls_per_s": round(len(ms) / wall, 1)}
            print(f"{n:>3} clients: p50 {report['levels'][str(n)]['p50_ms']} ms, "
                  f"p95 {report['levels'][str(n)]['p95_ms']} ms, "
                  f"{report['levels'][str(n)]['calls_per_s']} calls/s")
        report["refused_queries"] = refused
    finally:
        server.stop()
    try:  # the server has let the index go: this process holds it now
        report["in_process"] = in_process(vault, cache, first_slice or queries[:24], args.k)
        print(f"in process: p50 {report['in_process']['p50_ms']} ms, "
              f"p95 {report['in_process']['p95_ms']} ms (the one-client slice)")
    finally:
        if args.work is None:
            shutil.rmtree(tmp, ignore_errors=True)
    out = args.out or REPO / "benchmarks" / "results" / f"mcp-http-{args.vault.name}.json"
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
