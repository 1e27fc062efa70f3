"""A notes vault of a given size made from tldr pages, for the writing-help benchmark.

    python benchmarks/writing_vault.py DEST --chunks 10000 [--index]

tldr pages have one heading each, while notes people link to have headings to link to, so each
page becomes a note with a heading per example:

* ``# tar`` stays the note's title; the ``>`` description lines become its first paragraph,
  and ``See also: `gzip`, `bzip2``` becomes ``See also: [[gzip]], [[bzip2]]`` when those pages
  are in the vault (so the vault has a link graph);
* each example ``- Create an archive:`` becomes a ``## Create an archive`` section holding its
  command (tldr's ``[c]reate`` mnemonic brackets are dropped: a ``[`` cannot be in a wikilink);
* pages are taken in path order (``common/`` first, then ``linux/``, ...) until the engine's own
  chunker counts ``--chunks`` chunks with the default settings, so the size is exact and the same
  on every run.

``--index`` then indexes it with the real model (in process, into ``DEST/cache``, where
``MDSEARCH_CACHE_DIR`` points the server too): a 10k-chunk vault takes ~15 minutes on 2 cores,
once.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mdsearch_ls.config import Settings  # noqa: E402
from mdsearch_ls.engine.notes import chunking  # noqa: E402

TLDR = ROOT.parent / "shared" / "corpora" / "tldr" / "pages"
_MNEMONIC = re.compile(r"\[(\w{1,3})\]")
_SEE_ALSO = re.compile(r"^See also:?\s*(.*?)\.?$", re.IGNORECASE)
_CODE = re.compile(r"`([^`]+)`")


def note_from_page(text: str, known: set[str]) -> str:
    """One tldr page as a note with a heading per example (see the module docstring)."""
    title = ""
    desc: list[str] = []
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("# ") and not title:
            title = line[2:].strip()
        elif line.startswith("> "):
            body = line[2:].strip()
            see = _SEE_ALSO.match(body)
            if see:
                names = [n for n in _CODE.findall(see.group(1))]
                links = [f"[[{n}]]" if n in known else f"`{n}`" for n in names]
                body = "See also: " + ", ".join(links) + "." if links else body
            desc.append(body)
        elif line.startswith("- "):
            heading = _MNEMONIC.sub(r"\1", line[2:].strip()).rstrip(":").replace("[", "(")
            out.append(f"\n## {heading.replace(']', ')')}\n")
        elif line.startswith("`") and line.endswith("`"):
            out.append(line)
    return f"# {title}\n\n" + "\n".join(desc) + "\n" + "\n".join(out) + "\n"


def build(dest: Path, chunks: int) -> tuple[int, int]:
    """Write notes into ``dest/vault`` until they hold ``chunks`` chunks; (notes, chunks)."""
    vault = dest / "vault"
    pages = sorted(TLDR.glob("*/*.md"), key=lambda p: (p.parent.name != "common", str(p)))
    known = {p.stem for p in pages}
    settings = Settings()
    total = notes = 0
    for page in pages:
        rel = f"{page.parent.name}/{page.name}"
        text = note_from_page(page.read_text("utf-8"), known)
        n = len(chunking.parse_note(text, fallback_title=PurePosixPath(rel).stem,
                                    chunk_size=settings.chunk_size,
                                    chunk_overlap=settings.chunk_overlap).chunks)
        if total + n > chunks and total:
            break
        path = vault / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
        total += n
        notes += 1
    return notes, total


def index(dest: Path) -> float:
    """Index ``dest/vault`` with the real model into ``dest/cache``; seconds taken."""
    os.environ["MDSEARCH_CACHE_DIR"] = str(dest / "cache")
    from mdsearch_ls.engine.api import create_embedder
    from mdsearch_ls.engine.workspace import Workspace

    settings = Settings()
    embedder = create_embedder(settings)
    t0 = time.perf_counter()
    with Workspace.open(dest / "vault", settings, embedder=embedder) as ws:
        report = ws.index()
    print(report.summary(), flush=True)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dest", type=Path)
    ap.add_argument("--chunks", type=int, default=10_000)
    ap.add_argument("--index", action="store_true", help="index it with the real model")
    args = ap.parse_args(argv)
    dest = args.dest.resolve()
    if (dest / "vault").exists():
        print(f"{dest / 'vault'} exists; keeping it")
    else:
        notes, total = build(dest, args.chunks)
        print(f"wrote {notes} notes, {total} chunks to {dest / 'vault'}")
    if args.index:
        print(f"indexed in {index(dest):.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
