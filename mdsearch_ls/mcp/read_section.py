"""``read_section``: one section or line range of a note, numbered, within a budget, with the
heading paths of its siblings so an assistant can move around a note without reading all of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mdsearch_ls.mcp.answers import Answer, ToolInputError, lines_of, norm
from mdsearch_ls.mcp.roots import Library
from mdsearch_ls.mcp.tokens import counter

if TYPE_CHECKING:
    from mdsearch_ls.engine.api import Heading


def _crumb(h: Heading) -> str:
    return " > ".join(h.path)


def _find_heading(heads: tuple[Heading, ...], wanted: str
                  ) -> tuple[Heading, list[Heading]]:
    parts = [norm(p) for p in wanted.split(">") if p.strip()]
    if not parts:
        raise ToolInputError("'heading' is empty")
    matches = [h for h in heads
               if [norm(p) for p in h.path[-len(parts):]] == parts and len(h.path) >= len(parts)]
    if not matches:
        shown = "; ".join(_crumb(h) for h in heads[:40]) or "(the note has no headings)"
        more = f" (and {len(heads) - 40} more)" if len(heads) > 40 else ""
        raise ToolInputError(f"no heading {wanted!r} in this note; its headings: {shown}{more}")
    return matches[0], matches[1:]


def read(
    lib: Library,
    path: Any,
    heading: str | None,
    start1: int | None,
    end1: int | None,
    budget: int,
) -> Answer:
    """The answer of ``read_section`` for arguments already checked (1-based lines)."""
    from mdsearch_ls.engine.api import heading_at, outline

    loc, text = lib.read(path)
    lines = lines_of(text)
    n = len(lines)
    if lines and lines[-1] == "" and n > 1:
        n -= 1  # the newline at the end of the file is not a line of its own
    heads = outline(text)

    def heading_over(line0: int) -> Heading | None:
        at = heading_at(heads, line0)
        return heads[at] if at >= 0 else None

    notes: list[str] = []
    section: Heading | None = None
    if heading is not None:
        section, others = _find_heading(heads, heading)
        a, b = section.line, section.end_line
        if others:
            notes.append("Also matching: " + "; ".join(
                f"{_crumb(h)} (line {h.line + 1})" for h in others[:5]))
    elif start1 is not None or end1 is not None:
        if (start1 or 1) > n:
            raise ToolInputError(f"'start_line' {start1} is past the end of the note ({n} lines)")
        if start1 is not None:
            a = start1 - 1
            section = heading_over(a)
            b = end1 - 1 if end1 is not None else (section.end_line if section else n - 1)
        else:
            b = (end1 or 1) - 1
            section = heading_over(min(b, n - 1))
            a = section.line if section else 0
    else:
        a, b = 0, n - 1
    b = min(b, n - 1)
    while b > a and not lines[b].strip():
        b -= 1
    shown_path = lib.display(loc.folder, loc.rel)
    crumb = _crumb(section) if section else ""
    if section is not None:  # (none when the whole note is read)
        siblings = [h for h in heads if h.parent == section.parent and h is not section]
        sib_label = "Siblings"
    else:
        siblings = [h for h in heads if h.parent is None]
        sib_label = "Sections"
    sib = [{"heading_path": _crumb(h), "start_line": h.line + 1, "end_line": h.end_line + 1}
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
