"""The five MCP tools: their contract and the arguments they accept (renderings: :mod:`.answers`).

SDK-free on purpose: each tool takes plain arguments and returns an :class:`Answer` (the
``structuredContent`` object and the compact text a model reads), so the tools can be called
in-process by tests and the protocol glue in :mod:`mdsearch_ls.mcp.server` stays thin.

Conventions every tool keeps, so an assistant can rely on them:

* line numbers are 1-based and inclusive, in what tools return and in what they accept;
* a path is shown as the tools accept it back (see :mod:`mdsearch_ls.mcp.roots`);
* ``max_tokens`` bounds the text content of the answer (headers, section texts, notes) in the
  estimate of :mod:`mdsearch_ls.mcp.tokens`; ``structuredContent`` carries the same texts;
* text is cut only between words (at a line end when one is near), and a cut says where the rest
  starts;
* bad input is a tool error whose text says what to change.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mdsearch_ls.engine.api import MdsearchError
from mdsearch_ls.mcp import read_section as sections
from mdsearch_ls.mcp.answers import (
    Answer,
    ToolInputError,
    lines_of,
    render_hits,
    state_note,
)
from mdsearch_ls.mcp.roots import Library

SEARCH_LIMIT = 8
SEARCH_MAX_TOKENS = 2000
READ_MAX_TOKENS = 4000
RELATED_LIMIT = 5
RELATED_MAX_TOKENS = 1500
RELATED_MIN_SCORE = 0.25
MIN_BUDGET = 100
MAX_BUDGET = 100_000


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
            f"{', '.join(spec.schema['properties'])}"
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
    if index["state"] == "error" and not found and lib.folder_errors():
        # Nothing can be searched and a person must act (a refused /, a broken index): an
        # error the assistant shows, not an empty list it might read as "no match".
        raise ToolInputError("cannot search: " + "; ".join(lib.folder_errors()))
    state = state_note(index, len(found))
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
    return sections.read(lib, path, heading, start1, end1, budget)


# ---- related_sections -------------------------------------------------------------------------


def related_sections(
    lib: Library, path: Any = None, line: Any = None, limit: Any = None, max_tokens: Any = None
) -> Answer:
    budget = _budget(max_tokens, RELATED_MAX_TOKENS)
    line1 = _line(line, "line") or 1
    if limit is None:
        limit = RELATED_LIMIT
    loc, text = lib.read(path)
    shown = lib.display(loc.folder, loc.rel)
    count = len(lines_of(text))
    if line1 > count:
        raise ToolInputError(f"'line' {line1} is past the end of {shown} ({count} lines)")
    related = lib.related(loc, text, line1 - 1, limit, RELATED_MIN_SCORE)
    section = " > ".join(related.section.breadcrumb) if related.section else None
    found = [(loc.folder, h) for h in related.hits]
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
        if f["read_only"] and f["held_by"]:
            extra.append(f"held by another mdsearch process (pid {f['held_by']['pid']}, "
                         f"{f['held_by']['role']}), which keeps this index up to date")
        if f["queue"]:
            extra.append(f"{f['queue']} changes queued")
        if f["last_error"]:
            extra.append(f"error: {f['last_error']}")
        where = f" {f['root']} ·" if "root" in f else ""  # a remote caller sees no server path
        out.append(f"{f['name']}:{where} {f['index']['state']} · {f['files']} notes · "
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
    """Run a tool by name, its arguments normalised (errors: see :func:`answered`)."""
    spec = SPECS[name]
    return answered(lib, lambda: spec.run(lib, **normalise(spec, arguments)))


def answered(lib: Library, run: Callable[[], Any]) -> Any:
    """``run()``; what fails it for the caller (bad input, a refused path, an engine error) as a
    :class:`ToolInputError` whose text is short and, to a remote caller, shows no path of this
    machine. Tools and resources are answered through here."""
    try:
        return run()
    except (ToolInputError, MdsearchError) as exc:
        raise ToolInputError(cut_echo(lib.scrub(str(exc)))) from None
    except OSError as exc:  # e.g. a name too long: say why, never the server's own path
        raise ToolInputError(f"that path cannot be used: {exc.strerror or type(exc).__name__}") \
            from None


ECHO_CHARS = 400


def cut_echo(text: str) -> str:
    """An error message at most a few hundred characters long: a message may quote what it was
    given, and a 5 MB argument must not come back as a 5 MB error (past any token budget)."""
    if len(text) <= ECHO_CHARS:
        return text
    return f"{text[:ECHO_CHARS - 100].rstrip()}… (message cut: {len(text):,} characters)"
