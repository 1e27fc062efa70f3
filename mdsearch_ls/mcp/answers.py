"""Answers and their text renderings: section texts fitted into a ``max_tokens`` budget.

What a model reads is the text content, so this is where tokens are spent: headers are short, the
best hits are whole and the rest excerpts, every cut falls between words and says where the rest
is, and the total never exceeds the budget (counted, not assumed: see
:mod:`mdsearch_ls.mcp.tokens`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mdsearch_ls.mcp.tokens import counter, share

if TYPE_CHECKING:  # (roots imports ToolInputError from here)
    from mdsearch_ls.mcp.roots import Library

MIN_TEXT = 40
# The best hits are shown whole (as far as max_tokens allows); the rest as excerpts, enough to
# judge whether to read_section them: most questions are answered by the first few sections,
# and the tail of a result list is where whole sections would waste an assistant's context.
FULL_HITS = 3
EXCERPT_TOKENS = 60


class ToolInputError(Exception):
    """What a tool caller should read instead of an answer (bad arguments, a refused path, a
    server still starting); the message is written for a person, saying what to change."""


@dataclass
class Answer:
    """A tool's answer: the ``structuredContent`` object and the text a model reads."""

    structured: dict[str, Any]
    text: str


def norm(s: str) -> str:
    """A heading as compared: no leading ``#``, spaces collapsed, case folded."""
    return " ".join(s.strip().lstrip("#").split()).casefold()


# ---- text helpers -----------------------------------------------------------------------------


def lines_of(text: str) -> list[str]:
    """A note's lines, numbered as the engine and editors number them."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")


def _body(lines: list[str], start: int, end: int) -> tuple[str, int]:
    """Lines ``start..end`` (0-based, inclusive) without a leading heading line (the heading
    path says it) and without trailing blank lines; and the 0-based line the text starts at."""
    end = min(end, len(lines) - 1)
    if start <= end and lines[start].lstrip().startswith("#"):
        start += 1
    while start <= end and not lines[start].strip():
        start += 1
    while end >= start and not lines[end].strip():
        end -= 1
    return "\n".join(lines[start : end + 1]), start


def state_note(index: dict[str, Any], hits: int) -> str | None:
    """What a person should know about an index that is not complete."""
    state = index.get("state")
    done, total = index.get("files_done", 0), index.get("files_total", 0)
    eta = index.get("eta_seconds")
    left = f", about {eta:.0f} s left" if eta is not None else ""
    if state == "building":
        if not hits:
            if total:
                return (f"Nothing found yet, but the index is still being built ({done} of "
                        f"{total} notes{left}): ask again shortly.")
            return ("Nothing is indexed yet: the first index is starting (model loading, "
                    "notes being scanned); ask again in a few seconds.")
        counted = f" ({done} of {total} notes{left})" if total else ""
        return f"The index is still being built{counted}: results may be incomplete."
    if state == "empty" and not hits:
        return "The folders hold no indexed notes (no .md or .markdown files found)."
    if state == "interrupted":
        return "The last index run stopped before the end; results may be incomplete."
    if state == "error":
        return "The index could not be opened: see index_status."
    return None


# ---- fitting a rendering into a budget ----------------------------------------------------


def _fit(
    fixed: int, bodies: list[str], marker_cost: list[int], budget: int,
    caps: list[int | None] | None = None,
) -> list[tuple[str, bool]]:
    """Trim ``bodies`` so that ``fixed`` tokens plus the bodies plus a marker for each trimmed
    one fit ``budget``. A body never gets more than its cap (None: no cap); within the budget,
    equal shares, what a short body does not use going to the longer ones."""
    count = counter().count
    needs = [count(b) for b in bodies]
    caps = caps or [None] * len(bodies)
    want = [n if c is None else min(n, c) for n, c in zip(needs, caps, strict=True)]
    reserve = sum(m for m, n, w in zip(marker_cost, needs, want, strict=True) if n > w)
    avail = max(0, budget - fixed)
    allot = want
    if sum(want) + reserve > avail:
        for _ in range(len(bodies) + 1):
            allot = share(want, avail - reserve)
            new = sum(m for m, n, a in zip(marker_cost, needs, allot, strict=True) if n > a)
            if new <= reserve:
                break
            reserve = new
    return [counter().trim(b, a) for b, a in zip(bodies, allot, strict=True)]


# ---- search_markdown --------------------------------------------------------------------------


def _hit_texts(found: Sequence[tuple[Any, Any]]) -> list[tuple[str, int]]:
    """Each hit's section text from the note on disk (read once per note), and the 0-based
    line it starts at; the engine's snippet when the note cannot be read any more."""
    cache: dict[tuple[int, str], list[str] | None] = {}
    out = []
    for folder, hit in found:
        key = (id(folder), hit.path)
        if key not in cache:
            try:
                _, text = folder.read_note(hit.path)
                cache[key] = lines_of(text)
            except Exception:
                cache[key] = None
        lines = cache[key]
        if lines is None or hit.start_line >= len(lines):
            out.append((hit.snippet or "", hit.start_line))
        else:
            out.append(_body(lines, hit.start_line, hit.end_line))
    return out


def _score(hit: Any) -> float | None:
    # 6 digits: a client that prints 2 (the CLI's --server) must round once, not twice
    return None if hit.score is None else round(float(hit.score), 6)


def _hit_head(i: int, path: str, hit: Any) -> str:
    """``[1] path:12-30 · Heading > Sub · 0.62``; the note's title is left out of the heading
    path when it only repeats the file name (``heading_path`` in the structured result keeps
    it)."""
    score = f" · {hit.score:.2f}" if hit.score is not None else ""
    crumbs = hit.breadcrumb.split(" > ")
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    if len(crumbs) > 1 and norm(crumbs[0]) == norm(stem):
        crumbs = crumbs[1:]
    page = f" (page {hit.page})" if hit.page is not None else ""
    return (f"[{i}] {path}:{hit.start_line + 1}-{hit.end_line + 1}{page} · "
            f"{' > '.join(crumbs)}{score}")


def _marker(next_line: int, last_line: int) -> str:
    """Where the part not shown starts (a line cut inside counts from its start) and ends."""
    if next_line >= last_line:
        return f"…(truncated: the rest is line {next_line})"
    return f"…(truncated: the rest is lines {next_line}-{last_line})"


def render_hits(
    lib: Library, found: list[tuple[Any, Any]], header: str, notes: list[str], budget: int
) -> tuple[list[dict[str, Any]], str, int]:
    """Results and their text rendering within ``budget``: hits beyond what even their header
    lines fit are dropped (a note says so), the texts share what is left. ``found``: the
    ``(folder, hit)`` pairs the engine's ``Folders.search`` gives."""
    count = counter().count
    hits = [hit for _, hit in found]
    texts = _hit_texts(found)
    paths = [lib.display(folder, hit.path) for folder, hit in found]
    heads = [_hit_head(i + 1, paths[i], hit) for i, hit in enumerate(hits)]
    markers = [count(_marker(hit.end_line + 1, hit.end_line + 1)) for hit in hits]
    notes = list(notes)
    keep = len(found)
    while True:
        dropped = len(found) - keep
        extra = [f"{dropped} more hits left out to stay within max_tokens."] if dropped else []
        fixed = count(header) + sum(count(n) for n in notes + extra) + sum(map(count, heads[:keep]))
        # Fewer hits with some text beat many headers with none: each kept hit gets at least
        # MIN_TEXT tokens of room (or what its text needs, if less).
        room = sum(min(MIN_TEXT, count(t)) + c for (t, _), c in zip(texts[:keep], markers[:keep],
                                                                      strict=True))
        if fixed + (room if keep > 1 else 0) <= budget or keep == 0:
            break
        keep -= 1
    caps = [None if i < FULL_HITS else EXCERPT_TOKENS for i in range(keep)]
    fitted = _fit(fixed, [t for t, _ in texts[:keep]], markers[:keep], budget, caps)
    while True:
        results, blocks = [], []
        for i in range(keep):
            hit, (body, start0) = hits[i], texts[i]
            shown, cut = fitted[i]
            block = [heads[i]]
            if shown:
                block.append(shown)
            if cut:
                next_line = _next_line(body, shown, start0)
                block.append(_marker(next_line, hit.end_line + 1))
            blocks.append("\n".join(block))
            results.append({
                "path": paths[i],
                "heading_path": hit.breadcrumb,
                "start_line": hit.start_line + 1,
                "end_line": hit.end_line + 1,
                "score": _score(hit),
                "keyword_rank": hit.keyword_rank,
                **({"page": hit.page} if hit.page is not None else {}),
                "text": shown,
                "truncated": cut,
                "tokens": count(shown),
            })
        text = "\n".join([header, *notes, *extra])
        if blocks:
            text += "\n\n" + "\n\n".join(blocks)
        total = count(text)
        if total <= budget:
            return results, text, total
        if keep == 0:  # a budget too small for even the header: cut the header
            text, _ = counter().trim(text, budget)
            return results, text, count(text)
        # Never expected (counts add up), but never over budget: take the excess off the
        # longest text and render again.
        excess = total - budget
        longest = max(range(keep), key=lambda j: count(fitted[j][0]), default=None)
        if longest is None or not fitted[longest][0]:
            keep -= 1
            fitted = fitted[:keep]
            continue
        body = texts[longest][0]
        fitted[longest] = counter().trim(body, max(0, count(fitted[longest][0]) - excess))


def _next_line(body: str, shown: str, start0: int) -> int:
    """1-based line where the part of ``body`` not shown begins (a line cut inside counts as
    not shown from its start); ``start0`` is the 0-based line ``body`` starts at."""
    full = body.split("\n")
    kept = shown.split("\n") if shown else []
    whole = len(kept)
    if kept and kept[-1] != full[len(kept) - 1]:
        whole -= 1  # the last kept line was cut inside
    return start0 + whole + 1
