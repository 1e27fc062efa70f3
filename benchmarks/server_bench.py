"""Language-server latency through a real ``python -m mdsearch_ls serve`` process over stdio.

    python benchmarks/server_bench.py [VAULT] [--out FILE] [--big N]

Measures: process start -> ``initialize`` response; ``initialized`` -> ``mdsearch.status`` ready
(cold: fresh index dir; warm: second start on the same index); ``workspace/symbol`` and hover
latency p50/p95 while idle; and the same while the first index of a larger vault (N tldr pages)
runs. Prints and writes JSON (default ``benchmarks/results/server-<vault name>.json``).
"""

from __future__ import annotations

import argparse
import asyncio
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
DEFAULT_VAULT = REPO / "tests" / "fixtures" / "lsp-vault"
TLDR = Path("/work/shared/corpora/tldr/pages/common")
QUERIES = ["compress files into an archive", "list running processes", "copy files over ssh",
           "show disk usage", "search text in files", "change file permissions",
           "download a file from a url", "keep a wild yeast starter alive"]


class Client:
    """Minimal JSON-RPC over stdio: Content-Length framing, answers server requests with null."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.notifications: list[dict[str, Any]] = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while True:
                line = await out.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                k, _, v = line.decode().partition(":")
                if k.lower() == "content-length":
                    length = int(v)
            msg = json.loads(await out.readexactly(length))
            if "id" in msg and "method" in msg:  # a request from the server
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            elif "id" in msg:
                fut = self.pending.pop(msg["id"], None)
                if fut and not fut.done():
                    if "error" in msg:
                        fut.set_exception(RuntimeError(msg["error"]))
                    else:
                        fut.set_result(msg.get("result"))
            else:
                self.notifications.append(msg)

    def _send(self, obj: dict[str, Any]) -> None:
        body = json.dumps(obj).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def request(self, method: str, params: Any, timeout: float = 120) -> Any:
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.next_id] = fut
        self._send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return await asyncio.wait_for(fut, timeout)

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def status(self) -> dict[str, Any]:
        return await self.request("workspace/executeCommand",
                                  {"command": "mdsearch.status", "arguments": []})

    async def close(self) -> None:
        try:
            await self.request("shutdown", None, timeout=30)
            self.notify("exit", None)
            await asyncio.wait_for(self.proc.wait(), 30)
        except Exception:
            self.proc.kill()
            await self.proc.wait()
        self.reader.cancel()


async def start(vault: Path, cache: Path) -> tuple[Client, float]:
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "ANONYMIZED_TELEMETRY": "False"}
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mdsearch_ls", "serve", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env,
        limit=2**24,
    )
    client = Client(proc)
    await client.request("initialize", {
        "processId": os.getpid(), "rootUri": vault.as_uri(),
        "workspaceFolders": [{"uri": vault.as_uri(), "name": vault.name}],
        "capabilities": {"window": {"workDoneProgress": True},
                         "workspace": {"symbol": {}, "executeCommand": {}}},
    })
    return client, time.perf_counter() - t0


async def wait_ready(client: Client, timeout: float = 1800) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    client.notify("initialized", {})
    while True:
        st = await client.status()
        if st["state"] == "ready" and st["folders"] and all(
            f["state"] == "ready" for f in st["folders"]
        ):
            return time.perf_counter() - t0, st
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(st)
        await asyncio.sleep(0.05)


def pct(values: list[float]) -> dict[str, float]:
    ms = sorted(v * 1000 for v in values)
    if not ms:
        return {}
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 1), "p95_ms": round(p95, 1),
            "max_ms": round(ms[-1], 1)}


async def latencies(client: Client, vault: Path, rounds: int,
                    while_state: str | None = None) -> dict[str, Any]:
    notes = sorted(vault.rglob("*.md"))
    sym: list[float] = []
    hov: list[float] = []
    for i in range(rounds):
        if while_state and (await client.status())["state"] != while_state:
            break
        q = QUERIES[i % len(QUERIES)] + ("" if i < len(QUERIES) else f" {i}")
        t = time.perf_counter()
        await client.request("workspace/symbol", {"query": q})
        sym.append(time.perf_counter() - t)
        note = notes[i % len(notes)]
        t = time.perf_counter()
        await client.request("textDocument/hover", {
            "textDocument": {"uri": note.as_uri()}, "position": {"line": 2, "character": 0}})
        hov.append(time.perf_counter() - t)
    return {"workspace_symbol": pct(sym), "hover": pct(hov)}


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    vault = Path(args.vault).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="mdsearch-server-bench-"))
    out: dict[str, Any] = {
        "vault": str(vault), "files": len(list(vault.rglob("*.md"))),
        "python": platform.python_version(), "cpus": os.cpu_count(),
    }
    try:
        cache = tmp / "cache"
        client, init = await start(vault, cache)
        ready, st = await wait_ready(client)
        out["cold"] = {"initialize_s": round(init, 3), "ready_s": round(ready, 2),
                       "chunks": st["folders"][0]["chunks"]}
        out["idle"] = await latencies(client, vault, args.rounds)
        await client.close()

        client, init = await start(vault, cache)
        ready, st = await wait_ready(client)
        out["warm"] = {"initialize_s": round(init, 3), "ready_s": round(ready, 2)}
        await client.close()

        if TLDR.is_dir() and args.big:
            big = tmp / "tldr"
            big.mkdir()
            for page in sorted(TLDR.glob("*.md"))[: args.big]:
                shutil.copy(page, big / page.name)
            client, init = await start(big, tmp / "cache-big")
            t0 = time.perf_counter()
            client.notify("initialized", {})
            while True:  # wait until something is indexed, then measure while indexing runs
                st = await client.status()
                if st["folders"] and st["folders"][0]["chunks"] > 0:
                    break
                await asyncio.sleep(0.1)
            during = await latencies(client, big, args.rounds, while_state="indexing")
            st = await client.status()
            during["still_indexing_after"] = st["state"] == "indexing"
            during["first_chunks_after_s"] = round(time.perf_counter() - t0, 2)
            out["while_indexing"] = {"files": args.big, **during}
            await client.close()
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
    result = asyncio.run(main_async(args))
    text = json.dumps(result, indent=2)
    print(text)
    name = Path(args.vault).resolve().name
    path = Path(args.out) if args.out else REPO / "benchmarks" / "results" / f"server-{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
