"""Latency of the writing help, and the server's memory, through a real ``python -m mdsearch_ls
serve`` over stdio.

    python benchmarks/writing_bench.py [--vaults examples 10000] [--work DIR] [--rounds 40]
                                       [--tag NAME]

Each of ``--vaults`` is ``examples`` (``examples/vault``, copied), ``obsidian-help`` (the
corpus in ``../shared/corpora``, copied: long sections of several chunks, and two real
near-duplicates) or a number of chunks: a vault made from tldr pages
(``benchmarks/writing_vault.py``: a note per page, a heading per example, ``See also`` as
wikilinks). Each is indexed once with the real model into ``DIR/<name>/cache`` and reused by
later runs. Then, through the server (the model loaded, the index ready):

* ``completion_new_paragraph``: ``[[`` typed (``didChange``) in an open note after a paragraph
  the server has not embedded yet (one embedding and one nearest-neighbour query per request:
  the first completion in a paragraph);
* ``completion_typing_on``: the next requests of the same link, one more character typed each
  (the paragraph's vector and neighbours are reused: what typing after ``[[`` costs);
* ``completion_after_save``: the first completion after a note was saved and indexed (the index
  generation moved, so names and sections are read again);
* ``code_lens_resolve``: ``codeLens/resolve`` of every heading of a sample of notes;
* ``diagnostics_on_open``: ``didOpen`` to ``publishDiagnostics`` for that version (unlinked
  mentions and near-duplicates);
* ``rss_mb``: the server's resident memory (VmRSS, and its anonymous part: its own heap) once
  ready, and again after all of the above (the writing aids' tables read);

and in process, on the same index: near-duplicates and unlinked mentions per note, and reading
the index generation's tables (sections, names, links). Results are printed and written to
``benchmarks/results/writing-<name>[-<tag>].json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import writing_vault  # noqa: E402
from server_bench import pct, start, status, wait_ready  # noqa: E402

from mdsearch_ls.config import Settings  # noqa: E402
from tests.stdio_client import StdioClient  # noqa: E402

COPIED = {"examples": ROOT / "examples" / "vault",
          "obsidian-help": ROOT.parent / "shared" / "corpora" / "obsidian-help"}


def published(client: StdioClient, uri: str, version: int, timeout: float = 60) -> list[Any]:
    """The diagnostics the server publishes for ``uri`` at ``version``."""
    deadline = time.perf_counter() + timeout
    seen = 0
    while True:
        for msg in client.seen[seen:]:
            p = msg.get("params") or {}
            if (msg.get("method") == "textDocument/publishDiagnostics"
                    and p.get("uri") == uri and p.get("version") == version):
                return p["diagnostics"]
        seen = len(client.seen)
        left = deadline - time.perf_counter()
        if left <= 0:
            raise TimeoutError(f"no diagnostics for {uri}")
        try:
            msg = client.inbox.get(timeout=left)
        except queue.Empty:
            continue
        if msg is None:
            raise EOFError("the server closed its output")
        client.seen.append(msg)


def _prose(path: Path) -> list[str]:
    """Lines of ``path`` that read as sentences (no heading, code, table, list or front matter)."""
    lines = path.read_text("utf-8").split("\n")
    if lines and lines[0].strip() == "---":  # front matter
        end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), 0)
        lines = lines[end + 1:]
    return [line.strip() for line in lines
            if len(line.split()) >= 5 and not line.lstrip().startswith(
                ("#", "`", "|", "-", "*", ">", "See also", "[", "!"))]


def first_paragraphs(vault: Path, n: int, rng: random.Random) -> list[str]:
    """Paragraphs to write before ``[[``: a line of one note and another note's heading, so
    each is new to the server and about something in the vault."""
    notes = [p for p in sorted(vault.rglob("*.md")) if _prose(p)]
    out = []
    for _ in range(n):
        a, b = rng.sample(notes, 2)
        desc = rng.choice(_prose(a))
        head = next((line.lstrip("#").strip() for line in b.read_text("utf-8").split("\n")
                     if line.startswith("## ")), b.stem)
        out.append(f"{desc} Next I want to {head.lower()}; see")
    return out


def completion_latencies(client: StdioClient, vault: Path, rounds: int,
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
        published(client, uri, 1)
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"text": f"# Draft {i}\n\n{para} [["}]})
        pos = {"line": 2, "character": len(para) + 3}
        t = time.perf_counter()
        result = client.request("textDocument/completion", {
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
            client.request("textDocument/completion", {
                "textDocument": {"uri": uri}, "position": {"line": 2, "character": len(line)}})
            typing.append(time.perf_counter() - t)
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return {"completion_new_paragraph": pct(new), "completion_typing_on": pct(typing)}


def lens_latencies(client: StdioClient, notes: list[Path]) -> dict[str, Any]:
    resolves: list[float] = []
    lists: list[float] = []
    for note in notes:
        uri = note.as_uri()
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "markdown", "version": 1, "text": note.read_text("utf-8")}})
        t = time.perf_counter()
        lenses = client.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
        lists.append(time.perf_counter() - t)
        for lens in lenses or []:
            t = time.perf_counter()
            resolved = client.request("codeLens/resolve", lens)
            resolves.append(time.perf_counter() - t)
            assert resolved["command"]["title"], resolved
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return {"code_lens": pct(lists), "code_lens_resolve": pct(resolves)}


def diagnostics_latencies(client: StdioClient, notes: list[Path]) -> dict[str, Any]:
    times: list[float] = []
    counts = {"unlinked-mention": 0, "near-duplicate": 0}
    for note in notes:
        uri = note.as_uri()
        t = time.perf_counter()
        client.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "markdown", "version": 1, "text": note.read_text("utf-8")}})
        found = published(client, uri, 1)
        times.append(time.perf_counter() - t)
        for d in found:
            counts[d.get("code", "")] = counts.get(d.get("code", ""), 0) + 1
        client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return {"diagnostics_on_open": pct(times), "diagnostics_found": counts}


def after_save_latencies(client: StdioClient, vault: Path, notes: list[Path],
                         rng: random.Random) -> dict[str, Any]:
    first: list[float] = []
    second: list[float] = []
    uri = (vault / "drafts" / "after-save.md").as_uri()
    para = "I keep forgetting how to list the files in a directory sorted by size; see [["
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "markdown", "version": 1, "text": f"# Draft\n\n{para}"}})
    pos = {"line": 2, "character": len(para)}
    client.request("textDocument/completion", {"textDocument": {"uri": uri}, "position": pos})

    def chunks_become(n: int) -> None:
        while True:  # until the save is indexed
            folder = status(client)["folders"][0]
            if folder["queue"] == 0 and folder["chunks"] == n:
                return
            time.sleep(0.02)  # polling interval

    for n, note in enumerate(notes):
        original = note.read_text("utf-8")
        before = status(client)["folders"][0]["chunks"]
        note.write_text(original + f"\n## Edited {n}\n\nA line the benchmark added, "
                        f"{rng.random():.6f}.\n", encoding="utf-8")
        client.notify("textDocument/didSave", {"textDocument": {"uri": note.as_uri()}})
        chunks_become(before + 1)
        for bucket in (first, second):
            t = time.perf_counter()
            client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                       "position": pos})
            bucket.append(time.perf_counter() - t)
        note.write_text(original, encoding="utf-8")  # the next run starts from the same vault
        client.notify("textDocument/didSave", {"textDocument": {"uri": note.as_uri()}})
        chunks_become(before)
    return {"completion_after_save": pct(first), "completion_after_save_next": pct(second)}


def in_process(vault: Path, cache: Path, notes: list[Path]) -> dict[str, Any]:
    """Engine timings on the same index, opened once the server is gone."""
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
                                     "sections": round(sections * 1000, 1),
                                     "link_graph": round(links * 1000, 1),
                                     "mention_names": round(mention_table * 1000, 1)},
            "near_duplicates_per_note": pct(dups),
            "unlinked_mentions_per_note": pct(mentions),
            "found_in_sample": found,
        }


def rss(client: StdioClient) -> dict[str, float]:
    parts = client.rss_parts_mb()
    return {"rss": round(client.rss_mb(), 1), "anon": round(parts.get("anon", 0.0), 1)}


def prepare(name: str, work: Path) -> tuple[Path, Path]:
    """The vault and cache of ``name`` (one of ``COPIED`` or a chunk count), made and indexed
    once."""
    dest = work / (name if name in COPIED else f"c{name}")
    vault, cache = dest / "vault", dest / "cache"
    if not vault.exists():
        if name in COPIED:
            shutil.copytree(COPIED[name], vault)
            for p in vault.rglob("*"):  # (shared/ may be read-only)
                p.chmod(p.stat().st_mode | 0o200)
        else:
            notes, chunks = writing_vault.build(dest, int(name))
            print(f"built {notes} notes, {chunks} chunks in {vault}", flush=True)
    if not cache.exists():
        print(f"indexing {vault} with the real model (once) ...", flush=True)
        print(f"indexed in {writing_vault.index(dest):.0f}s", flush=True)
    return vault, cache


def bench(name: str, work: Path, rounds: int) -> dict[str, Any]:
    vault, cache = prepare(name, work)
    rng = random.Random(name)
    notes = sorted(p for p in vault.rglob("*.md") if p.parent.name != "drafts")
    sample = rng.sample(notes, min(len(notes), rounds))
    out: dict[str, Any] = {"vault": name, "python": platform.python_version(),
                           "cpus": os.cpu_count(), "load": round(os.getloadavg()[0], 1)}
    client, _ = start(vault, cache)
    try:
        ready, st = wait_ready(client)
        out["server"] = {"ready_s": round(ready, 2), "files": st["folders"][0]["files"],
                         "chunks": st["folders"][0]["chunks"]}
        print(f"[{name}] server ready in {ready:.1f}s: {out['server']}", flush=True)
        time.sleep(2)  # the open's own work settles (a measurement, not a synchronisation)
        out["rss_mb"] = {"ready": rss(client)}
        out.update(completion_latencies(client, vault, rounds, rng))
        out.update(lens_latencies(client, sample[:8]))
        out.update(diagnostics_latencies(client, sample))
        out.update(after_save_latencies(client, vault, sample[:5], rng))
        out["rss_mb"]["after_use"] = rss(client)
    finally:
        client.stop()
    out["in_process"] = in_process(vault, cache, sample)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vaults", nargs="+", default=["examples", "10000"])
    ap.add_argument("--work", type=Path, default=Path("/tmp/mdsearch-writing-bench"))
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--tag", default="", help="a suffix for the results file")
    args = ap.parse_args(argv)
    for name in args.vaults:
        result = bench(name, args.work.resolve(), args.rounds)
        text = json.dumps(result, indent=2)
        print(text, flush=True)
        label = name if name in COPIED else f"{int(name) // 1000}k"
        out = ROOT / "benchmarks" / "results" / (
            f"writing-{label}" + (f"-{args.tag}" if args.tag else "") + ".json")
        out.write_text(text + "\n", encoding="utf-8")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
