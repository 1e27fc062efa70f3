"""What the MCP server saves an assistant, and how soon it answers, through a real process.

    python benchmarks/mcp_bench.py [VAULT] [--queries Q.jsonl] [--starts N] [--out FILE]

Drives ``mdsearch mcp`` with the MCP SDK's own client over stdio, on a copy of VAULT (default
examples/vault) with its index in a temporary cache:

* **Tokens**: for every query of the labelled set, ``search_markdown`` at its defaults (limit 8,
  max_tokens 2000); the tokens of its text content (what the model reads) against the tokens of
  the whole notes the hits come from (the seed's "load the whole document" baseline), and against
  the whole notes of the top-3 hits only. Tokens are counted with the server's own estimate
  (:mod:`mdsearch_ls.mcp.tokens`).
* **Hit rate**: whether a relevant note is among the top 3 hits and among all hits (the whole
  notes of the same hits have the same hit rate by construction).
* **Start**: N fresh processes on the indexed vault: spawn -> ``initialize`` answer, spawn ->
  first ``search_markdown`` answer (and the mode that answered), interleaved with a start whose
  first search is in keyword mode (no model needed), plus how long the SDK import alone takes on
  this machine at that moment (the floor for the first number).

Prints a summary and writes JSON (default ``benchmarks/results/mcp-<vault name>.json``).
"""

from __future__ import annotations

import argparse
import asyncio
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from mdsearch_ls.mcp.tokens import TokenCounter  # noqa: E402

PYTHON = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv").exists() else sys.executable
DEFAULT_VAULT = REPO / "examples" / "vault"
DEFAULT_QUERIES = REPO / "benchmarks" / "queries" / "examples-vault.jsonl"


def params(vault: Path, cache: Path) -> StdioServerParameters:
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "ANONYMIZED_TELEMETRY": "False"}
    return StdioServerParameters(command=PYTHON,
                                 args=["-m", "mdsearch_ls", "mcp", "--root", str(vault)], env=env)


async def wait_ready(session: ClientSession, timeout: float = 900) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        st = (await session.call_tool("index_status", {})).structured_content
        if st["index"]["state"] == "ready" and st["model"]["state"] == "loaded":
            return st
        if time.monotonic() > deadline:
            raise SystemExit(f"server not ready after {timeout}s: {st}")
        await asyncio.sleep(0.5)


async def token_run(vault: Path, cache: Path, queries: list[dict[str, Any]],
                    errlog: Any) -> dict[str, Any]:
    counter = TokenCounter()
    note_tokens: dict[str, int] = {}

    def whole(path: str) -> int:
        if path not in note_tokens:
            note_tokens[path] = counter.count((vault / path).read_text(encoding="utf-8"))
        return note_tokens[path]

    rows = []
    async with stdio_client(params(vault, cache), errlog=errlog) as (r, w), \
            ClientSession(r, w) as s:
        await s.initialize()
        t0 = time.monotonic()
        status = await wait_ready(s)
        listed = await s.list_tools()
        tools_json = json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True)
                                 for t in listed.tools])
        instructions = s.instructions or ""
        for q in queries:
            result = await s.call_tool("search_markdown", {"query": q["query"]})
            if result.is_error:
                raise SystemExit(f"{q['query']!r}: {result.content[0].text}")
            sc = result.structured_content
            paths = [h["path"] for h in sc["results"]]
            notes = list(dict.fromkeys(paths))
            top3 = list(dict.fromkeys(paths[:3]))
            relevant = set(q["relevant"])
            rows.append({
                "query": q["query"],
                "kind": q.get("kind"),
                "hits": len(paths),
                "returned_tokens": counter.count(result.content[0].text),
                "structured_json_tokens": counter.count(json.dumps(sc, ensure_ascii=False)),
                "whole_notes_tokens": sum(whole(p) for p in notes),
                "top3_whole_notes_tokens": sum(whole(p) for p in top3),
                "notes": len(notes),
                "relevant_in_top3": bool(relevant & set(paths[:3])),
                "relevant_in_result": bool(relevant & set(paths)),
                "truncated": sum(1 for h in sc["results"] if h["truncated"]),
            })
    ret = sum(r["returned_tokens"] for r in rows)
    base = sum(r["whole_notes_tokens"] for r in rows)
    base3 = sum(r["top3_whole_notes_tokens"] for r in rows)
    n = len(rows)
    return {
        "queries": n,
        "index": {"files": sum(f["files"] for f in status["folders"]),
                  "chunks": sum(f["chunks"] for f in status["folders"]),
                  "seconds_to_ready_after_initialize": round(time.monotonic() - t0, 1)},
        "token_estimate": status["token_estimate"],
        "tools_list_tokens": counter.count(tools_json),
        "instructions_tokens": counter.count(instructions),
        "returned_tokens_total": ret,
        "returned_tokens_mean": round(ret / n, 1),
        "returned_tokens_max": max(r["returned_tokens"] for r in rows),
        "whole_notes_tokens_total": base,
        "whole_notes_tokens_mean": round(base / n, 1),
        "saving_vs_whole_notes": round(1 - ret / base, 4),
        "top3_whole_notes_tokens_total": base3,
        "saving_vs_top3_whole_notes": round(1 - ret / base3, 4),
        "top3_hit_rate": round(sum(r["relevant_in_top3"] for r in rows) / n, 4),
        "result_hit_rate": round(sum(r["relevant_in_result"] for r in rows) / n, 4),
        "rows": rows,
    }


def sdk_import_seconds() -> float:
    t0 = time.monotonic()
    subprocess.run([PYTHON, "-c", "import mcp.server.mcpserver"], check=True)
    return time.monotonic() - t0


async def one_start(vault: Path, cache: Path, query: str, errlog: Any,
                    mode: str | None = None) -> dict[str, Any]:
    t0 = time.monotonic()
    async with stdio_client(params(vault, cache), errlog=errlog) as (r, w), \
            ClientSession(r, w) as s:
        await s.initialize()
        t_init = time.monotonic() - t0
        args = {"query": query, **({"mode": mode} if mode else {})}
        result = await s.call_tool("search_markdown", args)
        t_first = time.monotonic() - t0
        sc = result.structured_content or {}
        return {"initialize_s": round(t_init, 3), "first_search_s": round(t_first, 3),
                "mode": sc.get("mode"), "hits": len(sc.get("results", [])),
                "is_error": result.is_error}


async def start_runs(vault: Path, cache: Path, n: int, query: str,
                     errlog: Any) -> dict[str, Any]:
    samples = []
    for _ in range(n):
        imp = await asyncio.to_thread(sdk_import_seconds)
        row = await one_start(vault, cache, query, errlog)
        row["sdk_import_s"] = round(imp, 3)
        row["load_average_1m"] = round(os.getloadavg()[0], 2)
        # Interleaved: the same start with a keyword search, which needs no model, to tell
        # the model's load from everything else.
        kw = await one_start(vault, cache, query, errlog, mode="keyword")
        row["first_keyword_search_s"] = kw["first_search_s"]
        samples.append(row)
        print(f"  start: initialize {row['initialize_s']:.2f} s, first search "
              f"{row['first_search_s']:.2f} s ({row['mode']}), first keyword search "
              f"{kw['first_search_s']:.2f} s, SDK import alone {row['sdk_import_s']:.2f} s, "
              f"load {row['load_average_1m']}", flush=True)

    def med(key: str) -> float:
        return round(statistics.median(s[key] for s in samples), 3)

    return {"runs": n, "query": query, "initialize_s_median": med("initialize_s"),
            "first_search_s_median": med("first_search_s"),
            "first_keyword_search_s_median": med("first_keyword_search_s"),
            "sdk_import_s_median": med("sdk_import_s"),
            "initialize_minus_sdk_import_s_median": round(statistics.median(
                s["initialize_s"] - s["sdk_import_s"] for s in samples), 3),
            "samples": samples}


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("vault", nargs="?", type=Path, default=DEFAULT_VAULT)
    ap.add_argument("--queries", type=Path, default=DEFAULT_QUERIES)
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    queries = [json.loads(line) for line in args.queries.read_text("utf-8").splitlines()
               if line.strip()]
    with tempfile.TemporaryDirectory(prefix="mcp-bench-") as tmp:
        base = Path(tmp)
        vault = base / args.vault.resolve().name
        shutil.copytree(args.vault, vault)
        cache = base / "cache"
        with open(base / "server.log", "w") as errlog:
            tokens = await token_run(vault, cache, queries, errlog)
            print(f"{tokens['queries']} queries: search_markdown returned "
                  f"{tokens['returned_tokens_mean']:.0f} tokens per query (max "
                  f"{tokens['returned_tokens_max']}); the whole notes of its hits "
                  f"{tokens['whole_notes_tokens_mean']:.0f}: "
                  f"{tokens['saving_vs_whole_notes']:.1%} fewer "
                  f"({tokens['saving_vs_top3_whole_notes']:.1%} fewer than the whole notes of "
                  f"the top 3 alone); relevant note in the top 3: {tokens['top3_hit_rate']:.1%}, "
                  f"anywhere in the result: {tokens['result_hit_rate']:.1%}", flush=True)
            print(f"tool definitions: {tokens['tools_list_tokens']} tokens, instructions "
                  f"{tokens['instructions_tokens']}", flush=True)
            starts = await start_runs(vault, cache, args.starts, queries[0]["query"], errlog)
        print(f"start, median of {starts['runs']}: initialize {starts['initialize_s_median']} s "
              f"(SDK import alone {starts['sdk_import_s_median']} s), first search answer "
              f"{starts['first_search_s_median']} s (keyword mode, no model: "
              f"{starts['first_keyword_search_s_median']} s)")
    out = args.out or REPO / "benchmarks" / "results" / f"mcp-{args.vault.resolve().name}.json"
    out.write_text(json.dumps({
        "vault": args.vault.resolve().name,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "platform": platform.platform()},
        "date": time.strftime("%Y-%m-%d"),
        "tokens": tokens,
        "start": starts,
    }, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    asyncio.run(main())
