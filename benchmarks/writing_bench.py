"""Latency of the writing help through a real ``python -m mdsearch_ls serve`` over stdio.

    python benchmarks/writing_bench.py [--sizes 1000 10000] [--work DIR] [--rounds 40]

For each size, a vault of that many chunks made from tldr pages (``benchmarks/writing_vault.py``:
a note per page, a heading per example, ``See also`` as wikilinks), indexed once with the real
model into ``DIR/c<size>/cache`` and reused by later runs. Then, through the server (the model
loaded, the index ready):

* ``completion_new_paragraph``: ``[[`` typed (``didChange``) in an open note after a paragraph
  the server has not embedded yet (one embedding per request: the first completion in a
  paragraph);
* ``completion_typing_on``: the next requests of the same link, one more character typed each
  (the paragraph's vector is reused: what typing after ``[[`` costs);
* ``completion_after_save``: the first completion after a note was saved and indexed (the index
  generation moved, so names, sections and vectors are read again);
* ``code_lens_resolve``: ``codeLens/resolve`` of every heading of a sample of notes;
* ``diagnostics_on_open``: ``didOpen`` to ``publishDiagnostics`` for that version (unlinked
  mentions and near-duplicates);

and in process, on the same index (held here once the server has exited): near-duplicates and
unlinked mentions per note, and reading the index generation's tables (sections with vectors,
names, links). Results are printed and written to ``benchmarks/results/writing-<size>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import writing_vault  # noqa: E402
from server_bench import Client, pct, start, wait_ready  # noqa: E402

from mdsearch_ls.config import Settings  # noqa: E402


class Watched(list):
    """The client's notification list, with an event set on every new one."""

    def __init__(self) -> None:
        super().__init__()
        self.event = asyncio.Event()

    def append(self, item: Any) -> None:
        super().append(item)
        self.event.set()


async def published(client: Client, uri: str, version: int, timeout: float = 60) -> list[Any]:
    notes: Watched = client.notifications  # type: ignore[assignment]
    deadline = time.perf_counter() + timeout
    seen = 0
    while True:
        for msg in notes[seen:]:
            p = msg.get("params") or {}
            if (msg.get("method") == "textDocument/publishDiagnostics" and p.get("uri") == uri
                    and p.get("version") == version):
                return p["diagnostics"]
        seen = len(notes)
        notes.event.clear()
        left = deadline - time.perf_counter()
        if left <= 0:
            raise TimeoutError(f"no diagnostics for {uri}")
        await asyncio.wait_for(notes.event.wait(), left)


def first_paragraphs(vault: Path, n: int, rng: random.Random) -> list[str]:
    """Paragraphs to write before ``[[``: a note's description and another note's heading, so
    each is new to the server and about something in the vault."""
    notes = sorted(vault.rglob("*.md"))
    out = []
    for _ in range(n):
        a, b = rng.sample(notes, 2)
        desc = next((line for line in a.read_text("utf-8").split("\n")[1:]
                     if line.strip() and not line.startswith(("#", "`", "See also"))), a.stem)
        head = next((line[3:] for line in b.read_text("utf-8").split("\n")
                     if line.startswith("## ")), b.stem)
        out.append(f"{desc} Next I want to {head.lower()}; see")
    return out


async def completion_latencies(client: Client, vault: Path, rounds: int,
                               rng: random.Random) -> dict[str, Any]:
    new: list[float] = []
    typing: list[float] = []
    names = sorted(p.stem for p in vault.rglob("*.md"))
    for i, para in enumerate(first_paragraphs(vault, rounds, rng)):
        uri = (vault / "drafts" / f"bench-{i}.md").as_uri()
        # The note is open (its diagnostics done), then "[[" is typed: the editor's flow.
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "markdown", "version": 1,
            "text": f"# Draft {i}\n\n{para} "}})
        await published(client, uri, 1)
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"text": f"# Draft {i}\n\n{para} [["}]})
        pos = {"line": 2, "character": len(para) + 3}
        t = time.perf_counter()
        result = await client.request("textDocument/completion", {
            "textDocument": {"uri": uri}, "position": pos})
        new.append(time.perf_counter() - t)
        assert result and result["items"], result
        typed = rng.choice(names)[:4]
        for k in range(1, len(typed) + 1):
            line = f"{para} [[{typed[:k]}"
            client.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": k + 2},
                "contentChanges": [{"text": f"# Draft {i}\n\n{line}"}]})
            t = time.perf_counter()
            await client.request("textDocument/completion", {
                "textDocument": {"uri": uri}, "position": {"line": 2, "character": len(line)}})
            typing.append(time.perf_counter() - t)
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return {"completion_new_paragraph": pct(new), "completion_typing_on": pct(typing)}


async def lens_latencies(client: Client, vault: Path, notes: list[Path]) -> dict[str, Any]:
    resolves: list[float] = []
    lists: list[float] = []
    for note in notes:
        uri = note.as_uri()
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "markdown", "version": 1, "text": note.read_text("utf-8")}})
        t = time.perf_counter()
        lenses = await client.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
        lists.append(time.perf_counter() - t)
        for lens in lenses or []:
            t = time.perf_counter()
            resolved = await client.request("codeLens/resolve", lens)
            resolves.append(time.perf_counter() - t)
            assert resolved["command"]["title"].endswith("linked"), resolved
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return {"code_lens": pct(lists), "code_lens_resolve": pct(resolves)}


async def diagnostics_latencies(client: Client, notes: list[Path]) -> dict[str, Any]:
    times: list[float] = []
    counts = {"unlinked-mention": 0, "near-duplicate": 0}
    for note in notes:
        uri = note.as_uri()
        t = time.perf_counter()
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "markdown", "version": 1, "text": note.read_text("utf-8")}})
        found = await published(client, uri, 1)
        times.append(time.perf_counter() - t)
        for d in found:
            counts[d.get("code", "")] = counts.get(d.get("code", ""), 0) + 1
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return {"diagnostics_on_open": pct(times), "diagnostics_found": counts}


async def after_save_latencies(client: Client, vault: Path, notes: list[Path],
                               rng: random.Random) -> dict[str, Any]:
    first: list[float] = []
    second: list[float] = []
    uri = (vault / "drafts" / "after-save.md").as_uri()
    para = "I keep forgetting how to list the files in a directory sorted by size; see [["
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "markdown", "version": 1, "text": f"# Draft\n\n{para}"}})
    pos = {"line": 2, "character": len(para)}
    await client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                     "position": pos})
    for n, note in enumerate(notes):
        original = note.read_text("utf-8")
        before = (await client.status())["folders"][0]["chunks"]
        note.write_text(original + f"\n## Edited {n}\n\nA line the benchmark added, "
                        f"{rng.random():.6f}.\n", encoding="utf-8")
        client.notify("textDocument/didSave", {"textDocument": {"uri": note.as_uri()}})
        while True:  # until the save is indexed: one more section
            folder = (await client.status())["folders"][0]
            if folder["queue"] == 0 and folder["chunks"] == before + 1:
                break
            await asyncio.sleep(0.02)
        for bucket in (first, second):
            t = time.perf_counter()
            await client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                             "position": pos})
            bucket.append(time.perf_counter() - t)
        note.write_text(original, encoding="utf-8")  # the next run starts from the same vault
        client.notify("textDocument/didSave", {"textDocument": {"uri": note.as_uri()}})
        while (await client.status())["folders"][0]["chunks"] != before:
            await asyncio.sleep(0.02)
    return {"completion_after_save": pct(first), "completion_after_save_next": pct(second)}


def in_process(vault: Path, cache: Path, notes: list[Path]) -> dict[str, Any]:
    """Engine timings on the same index, held in this process once the server has exited."""
    os.environ["MDSEARCH_CACHE_DIR"] = str(cache)
    from mdsearch_ls.engine.api import create_embedder
    from mdsearch_ls.engine.workspace import Workspace

    settings = Settings()
    with Workspace.open(vault, settings, embedder=create_embedder(settings)) as ws:
        aids = ws.writing
        t = time.perf_counter()
        view = aids.view()
        names = time.perf_counter() - t
        t = time.perf_counter()
        table = view.sections
        sections = time.perf_counter() - t
        t = time.perf_counter()
        graph = view.graph
        links = time.perf_counter() - t
        t = time.perf_counter()
        names_for_mentions = view.mention_names
        mention_table = time.perf_counter() - t
        dups: list[float] = []
        mentions: list[float] = []
        found = {"near_duplicates": 0, "unlinked_mentions": 0}
        for note in notes:
            rel = note.relative_to(vault).as_posix()
            text = note.read_text("utf-8")
            t = time.perf_counter()
            found["near_duplicates"] += len(aids.near_duplicates(rel))
            dups.append(time.perf_counter() - t)
            t = time.perf_counter()
            found["unlinked_mentions"] += len(aids.unlinked_mentions(rel, text))
            mentions.append(time.perf_counter() - t)
        return {
            "sections": len(table), "notes": len(view.names),
            "mention_names": len(names_for_mentions[0]),
            "links": sum(len(v) for v in graph.outgoing.values()),
            "generation_tables_ms": {"names": round(names * 1000, 1),
                                     "sections_and_vectors": round(sections * 1000, 1),
                                     "link_graph": round(links * 1000, 1),
                                     "mention_names": round(mention_table * 1000, 1)},
            "near_duplicates_per_note": pct(dups),
            "unlinked_mentions_per_note": pct(mentions),
            "found_in_sample": found,
        }


async def bench(size: int, work: Path, rounds: int) -> dict[str, Any]:
    dest = work / f"c{size}"
    vault, cache = dest / "vault", dest / "cache"
    if not vault.exists():
        notes, chunks = writing_vault.build(dest, size)
        print(f"built {notes} notes, {chunks} chunks in {vault}", flush=True)
    if not cache.exists():
        print(f"indexing {vault} with the real model (once) ...", flush=True)
        print(f"indexed in {writing_vault.index(dest):.0f}s", flush=True)
    rng = random.Random(size)
    notes = sorted(p for p in vault.rglob("*.md") if p.parent.name != "drafts")
    sample = rng.sample(notes, min(len(notes), rounds))
    out: dict[str, Any] = {"size": size, "python": platform.python_version(),
                           "cpus": os.cpu_count()}
    client, _ = await start(vault, cache)
    client.notifications = Watched()
    ready, st = await wait_ready(client)
    out["server"] = {"ready_s": round(ready, 2), "files": st["folders"][0]["files"],
                     "chunks": st["folders"][0]["chunks"]}
    print(f"[{size}] server ready in {ready:.1f}s: {out['server']}", flush=True)
    try:
        out.update(await completion_latencies(client, vault, rounds, rng))
        out.update(await lens_latencies(client, vault, sample[:8]))
        out.update(await diagnostics_latencies(client, sample))
        out.update(await after_save_latencies(client, vault, sample[:5], rng))
    finally:
        await client.close()
    out["in_process"] = in_process(vault, cache, sample)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    ap.add_argument("--work", type=Path, default=Path("/tmp/mdsearch-writing-bench"))
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args(argv)
    for size in args.sizes:
        result = asyncio.run(bench(size, args.work.resolve(), args.rounds))
        text = json.dumps(result, indent=2)
        print(text, flush=True)
        out = ROOT / "benchmarks" / "results" / f"writing-{size // 1000}k.json"
        out.write_text(text + "\n", encoding="utf-8")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
