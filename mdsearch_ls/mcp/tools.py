"""The five MCP tools: their contract, the arguments they accept, and how answers are rendered.

SDK-free on purpose: each tool takes plain arguments and returns an :class:`Answer` (the
``structuredContent`` object and the compact text a model reads), so the tools can be called
in-process by tests and the protocol glue in :mod:`mdsearch_ls.mcp.server` stays thin.

Conventions every tool keeps, so an assistant can rely on them:

* line numbers are 1-based and inclusive, in what tools return and in what they accept;
* a path is shown as the tools accept it back (see :mod:`mdsearch_ls.mcp.library`);
* ``max_tokens`` bounds the text content of the answer (headers, section texts, notes) in the
  estimate of :mod:`mdsearch_ls.mcp.tokens`; ``structuredContent`` carries the same texts;
* text is cut only between words (at a line end when one is near), and a cut says where the rest
  starts;
* bad input is a tool error whose text says what to change.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mdsearch_ls.mcp.library import FoundHit, Library, LibraryError
from mdsearch_ls.mcp.tokens import counter, share

SEARCH_LIMIT = 8
SEARCH_MAX_TOKENS = 2000
READ_MAX_TOKENS = 4000
RELATED_LIMIT = 5
RELATED_MAX_TOKENS = 1500
RELATED_MIN_SCORE = 0.25
MIN_BUDGET = 100
MIN_TEXT = 40
# The best hits are shown whole (as far as max_tokens allows); the rest as excerpts, enough to
# judge whether to read_section them: most questions are answered by the first few sections,
# and the tail of a result list is where whole sections would waste an assistant's context.
FULL_HITS = 3
EXCERPT_TOKENS = 60
MAX_BUDGET = 100_000


class ToolInputError(Exception):
    """Arguments a tool cannot use; the message says what to change."""


@dataclass
class Answer:
    structured: dict[str, Any]
    text: str


@dataclass(frozen=True)
class Spec:
    """One tool: what it is called, says and accepts."""

    name: str
    description: str
    schema: dict[str, Any]
    run: Callable[..., Answer]
    aliases: dict[str, str] = field(default_factory=dict)
    lists: frozenset[str] = frozenset()
    ints: frozenset[str] = frozenset()

    @property
    def params(self) -> list[str]:
        return list(self.schema["properties"])


# ---- arguments --------------------------------------------------------------------------------


def normalise(spec: Spec, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """Map guessed names to the real ones, split comma-separated lists, read numbers given as
    text; refuse names the tool does not know, listing the ones it does."""
    out: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in (arguments or {}).items():
        name = key if key in spec.schema["properties"] else spec.aliases.get(key)
        if name is None:
            unknown.append(key)
            continue
        if name in out and out[name] != value:
            raise ToolInputError(f"'{key}' and '{name}' mean the same argument; give one")
        out[name] = value
    if unknown:
        raise ToolInputError(
            f"unknown argument{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(u) for u in unknown)} for {spec.name}; valid: "
            f"{', '.join(spec.params)}"
        )
    for name in spec.lists & out.keys():
        out[name] = _as_list(out[name])
    for name in spec.ints & out.keys():
        out[name] = _as_int(out[name])
    missing = [p for p in spec.schema.get("required", ()) if out.get(p) in (None, "", [])]
    if missing:
        raise ToolInputError(f"{spec.name} needs {', '.join(repr(m) for m in missing)}")
    return {k: v for k, v in out.items() if v is not None}


def _as_list(value: Any) -> Any:
    """A list as models send it: a list, a JSON list in a string, or "a, b"."""
    if isinstance(value, str):
        s = value.strip()
        if s.startswith("["):
            try:
                parsed = json.loads(s)
            except ValueError:
                parsed = None
            if isinstance(parsed, list):
                return parsed
        parts = [p.strip() for p in s.split(",")]
        return [p for p in parts if p]
    return value


def _as_int(value: Any) -> Any:
    """``"5"`` and ``5.0`` are 5; anything else is left for the check that knows the limits."""
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _budget(value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolInputError(f"'max_tokens' must be a whole number, got {value!r}")
    if not MIN_BUDGET <= value <= MAX_BUDGET:
        raise ToolInputError(f"'max_tokens' must be from {MIN_BUDGET} to {MAX_BUDGET}, got {value}")
    return value


def _line(value: Any, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolInputError(f"'{name}' must be a line number from 1 (the first line), "
                             f"got {value!r}")
    return value


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


def _state_note(index: dict[str, Any], hits: int) -> str | None:
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


def _hit_texts(lib: Library, found: Sequence[FoundHit]) -> list[tuple[str, int]]:
    """Each hit's section text from the note on disk (read once per note), and the 0-based
    line it starts at; the engine's snippet when the note cannot be read any more."""
    cache: dict[tuple[int, str], list[str] | None] = {}
    out = []
    for f in found:
        key = (id(f.folder), f.hit.path)
        if key not in cache:
            try:
                _, text = f.folder.indexed.read_note(f.hit.path)
                cache[key] = lines_of(text)
            except Exception:
                cache[key] = None
        lines = cache[key]
        if lines is None or f.hit.start_line >= len(lines):
            out.append((f.hit.snippet or "", f.hit.start_line))
        else:
            out.append(_body(lines, f.hit.start_line, f.hit.end_line))
    return out


def _score(hit: Any) -> float | None:
    return None if hit.score is None else round(float(hit.score), 3)


def _hit_head(i: int, path: str, hit: Any) -> str:
    """``[1] path:12-30 · Heading > Sub · 0.62``; the note's title is left out of the heading
    path when it only repeats the file name (``heading_path`` in the structured result keeps
    it)."""
    score = f" · {hit.score:.2f}" if hit.score is not None else ""
    crumbs = hit.breadcrumb.split(" > ")
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    if len(crumbs) > 1 and _norm(crumbs[0]) == _norm(stem):
        crumbs = crumbs[1:]
    return f"[{i}] {path}:{hit.start_line + 1}-{hit.end_line + 1} · {' > '.join(crumbs)}{score}"


def _marker(next_line: int, last_line: int) -> str:
    """Where the part not shown starts (a line cut inside counts from its start) and ends."""
    if next_line >= last_line:
        return f"…(truncated: the rest is line {next_line})"
    return f"…(truncated: the rest is lines {next_line}-{last_line})"


def render_hits(
    lib: Library, found: list[FoundHit], header: str, notes: list[str], budget: int
) -> tuple[list[dict[str, Any]], str, int]:
    """Results and their text rendering within ``budget``: hits beyond what even their header
    lines fit are dropped (a note says so), the texts share what is left."""
    count = counter().count
    texts = _hit_texts(lib, found)
    paths = [lib.display(f.folder, f.hit.path) for f in found]
    heads = [_hit_head(i + 1, paths[i], f.hit) for i, f in enumerate(found)]
    markers = [count(_marker(f.hit.end_line + 1, f.hit.end_line + 1)) for f in found]
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
            f, (body, start0) = found[i], texts[i]
            shown, cut = fitted[i]
            block = [heads[i]]
            if shown:
                block.append(shown)
            if cut:
                next_line = _next_line(body, shown, start0)
                block.append(_marker(next_line, f.hit.end_line + 1))
            blocks.append("\n".join(block))
            results.append({
                "path": paths[i],
                "heading_path": f.hit.breadcrumb,
                "start_line": f.hit.start_line + 1,
                "end_line": f.hit.end_line + 1,
                "score": _score(f.hit),
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


def search_markdown(
    lib: Library,
    query: Any = None,
    limit: Any = None,
    mode: Any = None,
    path: Any = None,
    tag: Any = None,
    modified: Any = None,
    max_tokens: Any = None,
) -> Answer:
    budget = _budget(max_tokens, SEARCH_MAX_TOKENS)
    filters = {k: v for k, v in (("path", path), ("tag", tag), ("modified", modified)) if v}
    found, notes, used = lib.search(query, limit=limit, mode=mode, filters=filters,
                                    default_limit=SEARCH_LIMIT)
    index = lib.index_state()
    state = _state_note(index, len(found))
    if state:
        notes.append(state)
    quoted = query if len(query) <= 80 else query[:77].rstrip() + "…"
    if found:
        head = f'{len(found)} section{"s" if len(found) != 1 else ""} for "{quoted}"'
    elif index["state"] in ("building", "error"):
        head = f'No results yet for "{quoted}"'
    else:
        head = f'No section matches "{quoted}"'
    results, text, total = render_hits(lib, found, f"{head} (mode {used})", notes, budget)
    return Answer(
        {"query": query, "mode": used, "results": results, "total_tokens": total,
         "max_tokens": budget, "index": index, "notes": notes},
        text,
    )


# ---- read_section -----------------------------------------------------------------------------


@dataclass
class _Heading:
    path: tuple[str, ...]
    level: int
    start: int  # 0-based
    end: int  # 0-based, inclusive, subsections included
    parent: int | None


def _headings(text: str) -> list[_Heading]:
    from mdsearch_ls.engine.api import outline

    out: list[_Heading] = []
    stack: list[int] = []
    for h in outline(text):
        while stack and out[stack[-1]].level >= h.level:
            stack.pop()
        parent = stack[-1] if stack else None
        base = out[parent].path if parent is not None else ()
        out.append(_Heading((*base, h.title), h.level, h.line, h.end_line, parent))
        stack.append(len(out) - 1)
    return out


def _crumb(h: _Heading) -> str:
    return " > ".join(h.path)


def _norm(s: str) -> str:
    return " ".join(s.strip().lstrip("#").split()).casefold()


def _find_heading(heads: list[_Heading], wanted: str) -> tuple[_Heading, list[_Heading]]:
    parts = [_norm(p) for p in wanted.split(">") if p.strip()]
    if not parts:
        raise ToolInputError("'heading' is empty")
    matches = [h for h in heads
               if [_norm(p) for p in h.path[-len(parts):]] == parts and len(h.path) >= len(parts)]
    if not matches:
        shown = "; ".join(_crumb(h) for h in heads[:40]) or "(the note has no headings)"
        more = f" (and {len(heads) - 40} more)" if len(heads) > 40 else ""
        raise ToolInputError(f"no heading {wanted!r} in this note; its headings: {shown}{more}")
    return matches[0], matches[1:]


def _deepest(heads: list[_Heading], line0: int) -> _Heading | None:
    inside = [h for h in heads if h.start <= line0 <= h.end]
    return max(inside, key=lambda h: h.level) if inside else None


def read_section(
    lib: Library,
    path: Any = None,
    heading: Any = None,
    start_line: Any = None,
    end_line: Any = None,
    max_tokens: Any = None,
) -> Answer:
    budget = _budget(max_tokens, READ_MAX_TOKENS)
    start1, end1 = _line(start_line, "start_line"), _line(end_line, "end_line")
    if heading is not None and (start1 is not None or end1 is not None):
        raise ToolInputError("give 'heading' or 'start_line'/'end_line', not both")
    if heading is not None and not isinstance(heading, str):
        raise ToolInputError("'heading' must be a heading's text, or a heading path like "
                             "'Parent > Child' as search results show it")
    if start1 is not None and end1 is not None and end1 < start1:
        raise ToolInputError(f"'end_line' ({end1}) is before 'start_line' ({start1})")
    loc, text = lib.read(path)
    lines = lines_of(text)
    n = len(lines)
    if lines and lines[-1] == "" and n > 1:
        n -= 1  # the newline at the end of the file is not a line of its own
    heads = _headings(text)
    notes: list[str] = []
    section: _Heading | None = None
    if heading is not None:
        section, others = _find_heading(heads, heading)
        a, b = section.start, section.end
        if others:
            notes.append("Also matching: " + "; ".join(
                f"{_crumb(h)} (line {h.start + 1})" for h in others[:5]))
    elif start1 is not None or end1 is not None:
        if (start1 or 1) > n:
            raise ToolInputError(f"'start_line' {start1} is past the end of the note ({n} lines)")
        if start1 is not None:
            a = start1 - 1
            section = _deepest(heads, a)
            b = end1 - 1 if end1 is not None else (section.end if section else n - 1)
        else:
            b = (end1 or 1) - 1
            section = _deepest(heads, min(b, n - 1))
            a = section.start if section else 0
        b = min(b, n - 1)
    else:
        a, b = 0, n - 1
    b = min(b, n - 1)
    while b > a and not lines[b].strip():
        b -= 1
    shown_path = lib.display(loc.folder, loc.rel)
    crumb = _crumb(section) if section else ""
    if heading is None and start1 is None and end1 is None:
        siblings = [h for h in heads if h.parent is None]
        sib_label = "Sections"
    elif section is not None:
        siblings = [h for h in heads if h.parent == section.parent and h is not section]
        sib_label = "Siblings"
    else:
        siblings = [h for h in heads if h.parent is None]
        sib_label = "Sections"
    sib = [{"heading_path": _crumb(h), "start_line": h.start + 1, "end_line": h.end + 1}
           for h in siblings]
    count = counter().count

    def sib_text(items: list[dict[str, Any]]) -> str:
        if not items:
            return ""
        return f"{sib_label}: " + "; ".join(
            f"{s['heading_path']} ({s['start_line']}-{s['end_line']})" for s in items)

    header = f"{shown_path}:{a + 1}-{b + 1}" + (f" · {crumb}" if crumb else "")
    # The sibling list is navigation, not content: it gets at most half the budget.
    while sib and count(sib_text(sib)) > budget // 2:
        sib = sib[: len(sib) // 2]
    numbered = [f"{i + 1}\t{lines[i]}" for i in range(a, b + 1)]
    fixed = count(header) + sum(map(count, notes)) + count(sib_text(sib))
    costs = [count(line) for line in numbered]
    room = budget - fixed
    kept = numbered
    cut = sum(costs) > room
    # A first line longer than the whole budget is shown cut between words, and the answer says
    # what max_tokens shows it whole; continuing then goes on from the next line, so paging
    # with next_start_line always gets to the end.
    whole_at = fixed + costs[0] + 30 if numbered else 0

    def marker(next_start: int | None, partial: bool) -> str:
        if not partial:
            return f"…(truncated: continue with start_line={next_start})"
        then = f"; the next line is start_line={next_start}" if next_start else ""
        return f"…(line {a + 1} is cut: max_tokens={whole_at} shows it whole{then})"

    if cut:
        kept, used = [], 0
        room_lines = room - count(marker(b + 1, False))
        for line, c in zip(numbered, costs, strict=True):
            if used + c > room_lines:
                break
            kept.append(line)
            used += c
        if not kept:  # one long first line: cut it between words
            part, _ = counter().trim(numbered[0], max(0, room - count(marker(b + 1, True))))
            if "\t" in part:
                kept = [part]
    while True:
        partial = cut and bool(kept) and kept[-1] != numbered[len(kept) - 1]
        if not cut:
            next_start = None
        elif partial:
            next_start = a + 2 if a < b else None
        else:
            next_start = a + len(kept) + 1
        parts = [header, *notes]
        if kept:
            parts.append("\n".join(kept))
        if cut:
            parts.append(marker(next_start, partial))
        if sib:
            parts.append(sib_text(sib))
        body = "\n".join(parts)
        total = count(body)
        if total <= budget or not kept:
            break
        kept, cut = kept[:-1], True  # never expected (counts add up); never over budget
    raw_lines = lines[a : a + len(kept)]
    if partial:
        raw_lines[-1] = kept[-1].split("\t", 1)[1]
    raw = "\n".join(raw_lines)
    last = a + len(kept)  # 1-based number of the last line shown
    return Answer(
        {"path": shown_path, "heading_path": crumb or None, "start_line": a + 1,
         "end_line": last if kept else a + 1, "section_end_line": b + 1,
         "text": raw, "truncated": bool(cut), "next_start_line": next_start,
         "siblings": sib, "total_tokens": total, "max_tokens": budget, "notes": notes},
        body,
    )


# ---- related_sections -------------------------------------------------------------------------


def related_sections(
    lib: Library, path: Any = None, line: Any = None, limit: Any = None, max_tokens: Any = None
) -> Answer:
    budget = _budget(max_tokens, RELATED_MAX_TOKENS)
    line1 = _line(line, "line") or 1
    if limit is None:
        limit = RELATED_LIMIT
    loc, related = lib.related(path, line1 - 1, limit, RELATED_MIN_SCORE)
    shown = lib.display(loc.folder, loc.rel)
    section = " > ".join(related.section.breadcrumb) if related.section else None
    found = [FoundHit(loc.folder, h) for h in related.hits]
    notes: list[str] = []
    if not found:
        notes.append(f"No section of another note is similar enough (similarity "
                     f"{RELATED_MIN_SCORE} or more).")
    what = f"{shown}:{line1}" + (f" · {section}" if section else "")
    header = f"{len(found)} sections related to {what}"
    results, text, total = render_hits(lib, found, header, notes, budget)
    return Answer(
        {"path": shown, "line": line1, "section": section, "results": results,
         "total_tokens": total, "max_tokens": budget, "notes": notes},
        text,
    )


# ---- update_files / index_status ------------------------------------------------------------


def update_files(lib: Library, paths: Any = None) -> Answer:
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise ToolInputError("'paths' must be a list of note paths (or one string, "
                             "comma-separated)")
    if len(paths) > 1000:
        raise ToolInputError(f"at most 1000 paths at once, got {len(paths)}")
    results = lib.update(paths)
    if all(r["status"].startswith("refused") for r in results):
        raise ToolInputError("; ".join(f"{r['path']}: {r['status']}" for r in results))
    lines = [f"{r['path']}: {r['status']}" for r in results]
    return Answer({"results": results, "index": lib.index_state()}, "\n".join(lines))


def index_status(lib: Library) -> Answer:
    st = lib.status()
    idx = st["index"]
    files = sum(f["files"] for f in st["folders"])
    chunks = sum(f["chunks"] for f in st["folders"])
    progress = (f" ({idx['files_done']} of {idx['files_total']} notes"
                + (f", about {idx['eta_seconds']:.0f} s left" if "eta_seconds" in idx else "")
                + ")") if idx["state"] == "building" and idx["files_total"] else ""
    out = [
        f"{idx['state']}{progress}: {files} notes, {chunks} sections in "
        f"{len(st['folders'])} folder{'s' if len(st['folders']) != 1 else ''}; model "
        f"{st['model']['state']}; "
        + ("watching for changes" if st["watching"] else "not watching for changes"),
    ]
    for f in st["folders"]:
        extra = []
        if f["read_only"]:
            extra.append("read-only: another mdsearch process (an editor) writes this index")
        if f["queue"]:
            extra.append(f"{f['queue']} changes queued")
        if f["last_error"]:
            extra.append(f"error: {f['last_error']}")
        out.append(f"{f['name']}: {f['root']} · {f['index']['state']} · {f['files']} notes · "
                   f"updated {f['last_update'] or 'never'}"
                   + (" · " + "; ".join(extra) if extra else ""))
    if st["model"]["error"]:
        out.append(f"model error: {st['model']['error']}")
    if st["start_error"]:
        out.append(f"start error: {st['start_error']}")
    out.append(f"tokens are counted as {st['token_estimate']}")
    return Answer(st, "\n".join(out))


# ---- the tool table -----------------------------------------------------------------------------

_LIST = {"type": ["string", "array"], "items": {"type": "string"}}

SPECS: dict[str, Spec] = {
    s.name: s
    for s in (
        Spec(
            "search_markdown",
            "Search the user's markdown notes by meaning and keywords. Returns the best "
            "sections (path, heading_path, 1-based lines, score, text), all trimmed to share "
            "max_tokens. Search before reading notes; read_section gets more of a hit.",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": (
                        'What to find, in words. May include filters: path:dir/ tag:x '
                        'modified:>2025-01-01 "exact phrase"')},
                    "limit": {"type": "integer", "minimum": 1, "default": SEARCH_LIMIT},
                    "mode": {"type": "string", "enum": ["hybrid", "semantic", "keyword"]},
                    "path": {**_LIST, "description": "only notes under this folder or glob"},
                    "tag": {**_LIST, "description": "only notes with this tag"},
                    "modified": {"type": "string", "description": "e.g. >2025-01-01 or 30d"},
                    "max_tokens": {"type": "integer", "minimum": MIN_BUDGET,
                                   "default": SEARCH_MAX_TOKENS},
                },
                "required": ["query"],
            },
            search_markdown,
            aliases={"q": "query", "text": "query", "search": "query", "k": "limit",
                     "num_results": "limit", "top_k": "limit", "max_results": "limit",
                     "tags": "tag", "folder": "path"},
            lists=frozenset({"path", "tag"}),
            ints=frozenset({"limit", "max_tokens"}),
        ),
        Spec(
            "read_section",
            "Read one section of a note by heading (or a 1-based line range; no heading or "
            "lines: the whole note), with line numbers, within max_tokens. Lists the sibling "
            "sections' heading paths and lines, to navigate without reading the whole note.",
            {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "heading": {"type": "string",
                                "description": "a heading, or a heading_path from search"},
                    "start_line": {"type": "integer", "minimum": 1},
                    "end_line": {"type": "integer", "minimum": 1},
                    "max_tokens": {"type": "integer", "minimum": MIN_BUDGET,
                                   "default": READ_MAX_TOKENS},
                },
                "required": ["path"],
            },
            read_section,
            aliases={"file": "path", "note": "path", "section": "heading",
                     "heading_path": "heading", "line": "start_line", "start": "start_line",
                     "end": "end_line"},
            ints=frozenset({"start_line", "end_line", "max_tokens"}),
        ),
        Spec(
            "related_sections",
            "Sections of other notes most related to the section at a line of a note "
            "(1-based; default: the note's first section), trimmed to share max_tokens.",
            {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "line": {"type": "integer", "minimum": 1, "default": 1},
                    "limit": {"type": "integer", "minimum": 1, "default": RELATED_LIMIT},
                    "max_tokens": {"type": "integer", "minimum": MIN_BUDGET,
                                   "default": RELATED_MAX_TOKENS},
                },
                "required": ["path"],
            },
            related_sections,
            aliases={"file": "path", "note": "path", "start_line": "line", "k": "limit",
                     "num_results": "limit", "top_k": "limit"},
            ints=frozenset({"line", "limit", "max_tokens"}),
        ),
        Spec(
            "update_files",
            "Reindex these notes now (paths as results show them, or absolute); a deleted "
            "note is dropped. Rarely needed: the server watches its folders and reindexes "
            "changed notes within seconds.",
            {
                "type": "object",
                "properties": {"paths": {**_LIST}},
                "required": ["paths"],
            },
            update_files,
            aliases={"path": "paths", "files": "paths", "file": "paths"},
            lists=frozenset({"paths"}),
        ),
        Spec(
            "index_status",
            "What is indexed and how fresh it is: folders, notes, index state (ready, or "
            "building with progress), the model, and whether file watching is on.",
            {"type": "object", "properties": {}},
            index_status,
        ),
    )
}

INSTRUCTIONS = (
    "Searches the user's markdown notes: search_markdown finds the sections that answer a "
    "question (path, heading path, lines, text), read_section reads one section or line range, "
    "related_sections finds related notes.\n"
    "Search before reading whole notes and cite notes as path:line; the index follows file "
    "changes by itself (index_status shows its state, update_files forces a reindex)."
)


def call(lib: Library, name: str, arguments: dict[str, Any] | None) -> Answer:
    """Run a tool by name: arguments normalised, errors as :class:`ToolInputError` with text
    for the caller."""
    from mdsearch_ls.engine.api import MdsearchError

    spec = SPECS[name]
    args = normalise(spec, arguments)
    try:
        return spec.run(lib, **args)
    except (LibraryError, MdsearchError) as exc:
        raise ToolInputError(str(exc)) from None
