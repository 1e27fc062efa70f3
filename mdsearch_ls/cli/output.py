"""What ``search`` and ``related`` print on stdout: the formats (text, json, jsonl, vimgrep,
paths), colour the way rg uses it, snippets cut to the terminal's width with the query's words
marked, and ``--open`` in ``$VISUAL``/``$EDITOR``. The same printer prints whoever searched (this
process, the process that holds the index, a team's server): hits carry their section's text."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mdsearch_ls.cli.common import (
    EXIT_NOTHING,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    _err,
    _note,
    _shown,
    log,
)
from mdsearch_ls.engine.api import Snippet, match_spans, query_terms, snippet, wrap

_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7f, 0xa0)) if c not in (9, 10)}
"""C0 and C1 control characters (and DEL) but tab and newline, as ``\\x1b``."""


def visible(text: str) -> str:
    """``text`` with its control characters shown escaped: a note (or a file name) must not
    drive the terminal of whoever searches it (OSC 52 writes the clipboard, OSC 8 hides a link,
    CSI clears the screen), least of all on a team server. Every human format writes note text
    through this (``_Style``); JSON escapes them by itself."""
    return text.translate(_CONTROLS)


class _Style:
    """ANSI colours the way rg uses them (path magenta, line green, match bold red), or none."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def for_terminal(cls, term: Terminal, choice: str) -> _Style:
        if choice == "never":
            return cls(False)
        if choice == "always":
            return cls(True)
        if term.no_color or term.dumb:
            return cls(False)
        return cls(term.tty)

    def _sgr(self, code: str, text: str) -> str:
        text = visible(text)
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled and text else text

    def path(self, text: str) -> str:
        return self._sgr("35", text)

    def line(self, text: str) -> str:
        return self._sgr("32", text)

    def crumb(self, text: str) -> str:
        return self._sgr("1", text)

    def dim(self, text: str) -> str:
        return self._sgr("2", text)

    def marked(self, text: str, spans: Sequence[tuple[int, int]], base: str = "") -> str:
        """``text`` with the spans in bold red, the rest in ``base`` (an SGR code, or plain)."""
        if not self.enabled:
            return visible(text)
        restore = f"\x1b[0m\x1b[{base}m" if base else "\x1b[0m"
        out, pos = [f"\x1b[{base}m"] if base else [], 0
        for s, e in spans:
            out.append(visible(text[pos:s]))
            out.append(f"\x1b[1;31m{visible(text[s:e])}{restore}")
            pos = e
        out.append(visible(text[pos:]))
        if base:
            out.append("\x1b[0m")
        return "".join(out)


class Terminal:
    """Where a search's output goes and what it is shown on: this process's stdout and stderr and
    the terminal they are on (its width, whether colour is wanted)."""

    def __init__(self) -> None:
        self.out, self.err = sys.stdout, sys.stderr
        self.columns = shutil.get_terminal_size((100, 24)).columns
        self.tty = hasattr(self.out, "isatty") and self.out.isatty()
        self.no_color = bool(os.environ.get("NO_COLOR"))
        self.dumb = os.environ.get("TERM") == "dumb"

    def shown(self, path: Path) -> str:
        return _shown(path)

    def note(self, args: argparse.Namespace, message: str) -> None:
        _note(args, message, self.err)


def _hit_json(hit: Any, root: Path, rendered: Any, *, mode: str, explain: bool
              ) -> dict[str, Any]:
    out = hit.to_json(explain=explain)
    out["line"] = hit.start_line + 1
    out["file"] = str(root / hit.path)
    if mode == "keyword" or hit.score is None:
        out["score"] = None  # keyword order is BM25's; a cosine here would be a fake number
    out["keyword_rank"] = hit.keyword_rank
    out["snippet"] = rendered.text
    return out


class QueryFailed(Exception):
    """A query its search refused; in a batch its message is printed in its place, alone it is
    the command's error (exit 2)."""


def print_queries(args: argparse.Namespace, printer: _Printer, queries: Sequence[Any],
                  search: Callable[[Any], Any],
                  index_note: Callable[[Any], str | None] | None = None,
                  ) -> tuple[int, list[Any]]:
    """Each query's hits, or its error, as the format prints them, whoever searched (this
    process, the server that holds the index, a team's server): ``(exit code, last hits)``."""
    status, hits, found = EXIT_OK, [], False
    for q in queries:
        if q.error is not None:
            printer.error(q.text, q.error)
            status = EXIT_USAGE
            continue
        try:
            result = search(q)
        except QueryFailed as exc:
            if not args.queries:
                raise UsageError(str(exc)) from None
            printer.error(q.text, str(exc))
            status = EXIT_USAGE
            continue
        for note in result.notes:
            printer.term.note(args, f"note: {note}")
        said = index_note(result.index) if index_note is not None else None
        if said:
            printer.term.note(args, said)
        printer.query(q.text, result, _terms(q.text, q.request, getattr(args, "phrase", None)),
                      batch=bool(args.queries))
        hits = list(result.hits)
        found = found or bool(hits)
    return (EXIT_NOTHING if status == EXIT_OK and not found else status), hits


def _score_text(hit: Any, mode: str) -> str:
    if mode == "keyword" or hit.score is None:
        rank = hit.keyword_rank
        return f"BM25 rank {rank if rank is not None else '-'}"
    return f"similarity {hit.score:.2f}"


class _Printer:
    """Writes hits in the chosen format; one per command run."""

    def __init__(self, args: argparse.Namespace, root: Path, mode: str) -> None:
        self.args = args
        self.root = root
        self.mode = mode
        self.format = args.format or "text"
        self.explain = bool(getattr(args, "explain", False))
        self.term = Terminal()
        self.style = _Style.for_terminal(self.term, args.color)
        self._seen_paths: set[str] = set()

    def rendered(self, hits: Sequence[Any], terms: Sequence[str], limit: int) -> list[Snippet]:
        """Each hit's section as plain text cut between words, its query words marked."""
        return [snippet(h.text, terms, limit) if h.text
                else Snippet(h.snippet, tuple(match_spans(h.snippet, terms))) for h in hits]

    def query(self, query: str, result: Any, terms: Sequence[str], *, batch: bool,
              key: str = "query") -> None:
        hits = result.hits
        fmt = self.format
        if fmt == "json":
            rendered = self.rendered(hits, terms, 200)
            self._print(json.dumps({
                "query": query,
                "root": str(self.root),
                "results": [_hit_json(h, self.root, r, mode=self.mode, explain=self.explain)
                            for h, r in zip(hits, rendered, strict=True)],
                "notes": list(result.notes),
                "index": result.index.to_json(),
            }, ensure_ascii=False))
        elif fmt == "jsonl":
            rendered = self.rendered(hits, terms, 200)
            for rank, (h, r) in enumerate(zip(hits, rendered, strict=True), start=1):
                obj = {key: query, "rank": rank,
                       **_hit_json(h, self.root, r, mode=self.mode, explain=self.explain)}
                self._print(json.dumps(obj, ensure_ascii=False))
        elif fmt == "vimgrep":
            rendered = self.rendered(hits, terms, 160)
            for h, r in zip(hits, rendered, strict=True):
                path = self.style.path(self.term.shown(self.root / h.path))
                text = f"{visible(h.breadcrumb)}: {self.style.marked(r.text, r.spans)}"
                line = h.start_line + 1 if h.file_lines else 1
                self._print(f"{path}:{self.style.line(str(line))}:1:{text}")
        elif fmt == "paths":
            for h in hits:
                shown = self.term.shown(self.root / h.path)
                if shown not in self._seen_paths:
                    self._seen_paths.add(shown)
                    self._print(self.style.path(shown))
        else:
            if batch:
                self._print(self.style.dim(f"# {query}"))
            self.text(query, hits, terms)
        self.term.out.flush()

    def text(self, query: str, hits: Sequence[Any], terms: Sequence[str]) -> None:
        if not hits:
            self._print(f"no results for {query!r}")
            return
        indent = "    "
        width = max(self.term.columns - len(indent), 20)
        rendered = self.rendered(hits, terms, width * 2)
        st = self.style
        for i, (h, r) in enumerate(zip(hits, rendered, strict=True), start=1):
            # path:line first: the form terminals and editors open on a click.
            start, end = h.start_line + 1, h.end_line + 1
            shown = st.path(self.term.shown(self.root / h.path))
            if h.file_lines:
                self._print(f"{i:2}. {shown}:{st.line(str(start))}  "
                            + st.dim(f"(lines {start}-{end}, {_score_text(h, self.mode)})"))
            else:  # a converted document: its page, or its heading path below, says where
                where = f"page {h.page}, " if h.page is not None else ""
                self._print(f"{i:2}. {shown}  "
                            + st.dim(f"({where}{_score_text(h, self.mode)})"))
            crumb = h.breadcrumb
            self._print(f"{indent}{st.marked(crumb, match_spans(crumb, terms), base='1')}")
            for line in wrap(r, width, 2):
                self._print(f"{indent}{st.marked(line.text, line.spans)}")
            if self.explain:
                e = h.explain
                self._print(st.dim(f"{indent}[semantic #{e.get('semantic_rank')}, keyword "
                                   f"#{e.get('keyword_rank')}, title match "
                                   f"{e.get('title_match')}, {e.get('fusion') or 'fused'} "
                                   f"{e.get('fused')}]"))

    def error(self, query: str, message: str) -> None:
        if self.format in ("json", "jsonl"):
            self._print(json.dumps({"query": query, "error": message}, ensure_ascii=False))
            self.term.out.flush()
        else:
            _err(f"{query!r}: {message}", self.term.err)

    def _print(self, line: str) -> None:
        print(line, file=self.term.out)


_PHRASE = re.compile(r'"([^"]+)"')


def _terms(query: str, request: Any, extra_phrases: Sequence[str] | None) -> tuple[str, ...]:
    phrases = [*_PHRASE.findall(query), *(extra_phrases or ())]
    return query_terms(request.text if request is not None else query, phrases)


def _open_in_editor(path: Path, line: int) -> int:
    """``$VISUAL``/``$EDITOR`` at ``line``: ``+LINE FILE`` (vi, vim, nvim, emacs, nano, micro,
    kak), ``-g FILE:LINE`` for VS Code and its forks, ``FILE:LINE`` for editors that take that.
    Neither set: ``vi``, as git does (Notepad on Windows, which takes no line)."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor and sys.platform == "win32":
        return subprocess.call(["notepad", str(path)])
    cmd = shlex.split(editor or "vi")
    name = Path(cmd[0]).name.lower().removesuffix(".exe")
    if name in ("code", "code-insiders", "codium", "vscodium", "cursor", "code-server"):
        cmd += ["-g", f"{path}:{line}"]
    elif name in ("subl", "sublime_text", "hx", "helix", "zed", "mate"):
        cmd += [f"{path}:{line}"]
    else:
        cmd += [f"+{line}", str(path)]
    log.info("opening: %s", shlex.join(cmd))
    try:
        return subprocess.call(cmd)
    except OSError as exc:
        hint = "" if editor else " (set $VISUAL or $EDITOR, e.g. export EDITOR=nvim)"
        raise UsageError(f"cannot run the editor {cmd[0]!r}: {exc.strerror or exc}{hint}") \
            from None


def _maybe_open(args: argparse.Namespace, root: Path, hits: Sequence[Any]) -> int:
    if args.open is None:
        return EXIT_OK
    if not 1 <= args.open <= len(hits):
        raise UsageError(f"--open {args.open}: there are {len(hits)} hits")
    hit = hits[args.open - 1]
    return _open_in_editor(root / hit.path, hit.start_line + 1 if hit.file_lines else 1)


def _check_output_args(args: argparse.Namespace) -> None:
    if args.open is not None and args.open < 1:
        raise UsageError(f"--open: expected a hit number from 1, got {args.open}")
    if args.open is not None and getattr(args, "queries", None):
        raise UsageError("--open takes one query, not --queries")
