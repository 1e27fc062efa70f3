"""The ``mdsearch`` command: index, search, related, status and serve, over the same core.

Results go to stdout, in the form ``--format`` asks for (``text`` for people, ``json``/``jsonl``
for scripts, ``vimgrep`` for editors' quickfix lists and fzf, ``paths`` for ``xargs``); notes,
warnings, progress and logs go to stderr, so any format can be piped. Colour only on a terminal
and never with ``NO_COLOR``. Lines are 1-based wherever a person reads or types them (``path:27``,
``--line 27``); JSON keeps the 0-based ``start_line``/``end_line`` of LSP ranges and adds the
1-based ``line``.

Exit codes are part of the interface: 0 ok, 1 unexpected error, 2 bad usage (no index here, a
missing folder, a bad query or filter, a confirmation not given), 3 the index is locked by
another process, 4 the index or the model cannot be opened, 130/143 interrupted by
SIGINT/SIGTERM (what was committed stays in the index).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from mdsearch_ls import __version__
from mdsearch_ls.config import (
    SettingError,
    SettingInfo,
    Settings,
    cli_settings,
    settings_from_flags,
)
from mdsearch_ls.logs import configure_logging, level_from_flags

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_LOCKED, EXIT_OPEN = 0, 1, 2, 3, 4
EXIT_SIGINT, EXIT_SIGTERM = 130, 143
FORMATS = ("text", "json", "jsonl", "vimgrep", "paths")

log = logging.getLogger("mdsearch")


class UsageError(Exception):
    """Something the person at the prompt can fix (exit 2); the message says how."""


# ---- help ---------------------------------------------------------------------------------------

GETTING_STARTED = """\
getting started:
  mdsearch index ~/notes                    index a folder once (later runs only read changes)
  cd ~/notes
  mdsearch search "how do I rotate the backup keys"
  mdsearch search "invoices tag:finance" -k 10 --format vimgrep | fzf
  mdsearch search "backup keys" --open 1    open the best hit in $VISUAL/$EDITOR at its line
  mdsearch related people/Onboarding.md --line 12

search, related and status use the nearest folder at or above the current one that has an index
(like git finds its repository); --root names another. Lines are 1-based everywhere you read or
type them. Run `mdsearch COMMAND --help` for a command's options and examples.

exit codes: 0 ok, 1 unexpected error, 2 bad usage, 3 index locked by another process,
4 index or model cannot be opened, 130/143 interrupted (what was indexed is kept)."""

EXAMPLES = {
    "index": """\
examples:
  mdsearch index ~/notes                   build the index, or bring it up to date
  mdsearch index                           update the index of the folder you are in
  mdsearch index ~/notes --rebuild         drop the index and embed everything again
  mdsearch index ~/notes --exclude 'archive/' --include '.notes/**'
  mdsearch index ~ --yes                   a home folder or / always asks first

Dot-folders (.venv/, .cache/), .git/, node_modules/, .obsidian/, .trash/ and whatever .gitignore
lists are left out. Ctrl-C stops after the current batch and keeps what was indexed.""",
    "search": """\
examples:
  mdsearch search "what do we do when more than 5% of requests fail"
  mdsearch search "ERR_CERT_DATE_INVALID" --mode keyword -k 3
  mdsearch search 'invoices overdue tag:finance path:reports/ modified:>2025-01-01'
  mdsearch search "backup keys" --open 1          open hit 1 in $VISUAL/$EDITOR
  mdsearch search "backup keys" --format vimgrep | fzf --delimiter : --preview 'sed -n {2},+20p {1}'
  nvim -q <(mdsearch search "backup keys" --format vimgrep)
  mdsearch search "onboarding" -l               each matching note once (like rg -l)
  mdsearch search --queries questions.txt --format jsonl   model loaded once

formats: text (default; colour on a terminal), json (one object per query), jsonl (one object
per hit), vimgrep (path:line:column:text), paths (each note once).""",
    "related": """\
examples:
  mdsearch related people/Onboarding.md --line 12
  mdsearch related ~/notes/finance/Revenue.md --line 40 --format vimgrep
  mdsearch related Home.md --open 1""",
    "status": """\
examples:
  mdsearch status
  mdsearch status --root ~/notes --json""",
    "mcp": """\
examples:
  mdsearch mcp --root ~/notes                 what an AI assistant starts (stdio); see
                                              docs/mcp.md for the mcpServers entry
  mdsearch mcp --root ~/notes --root ~/work   several folders, searched as one set""",
    "serve": """\
examples:
  mdsearch serve              what an editor starts (stdio); see the README for VS Code,
                              Neovim and Helix set-ups""",
}


class _Parser(argparse.ArgumentParser):
    """argparse that suggests the command or flag a typo was meant to be."""

    suggestions: Sequence[str] = ()

    def error(self, message: str) -> Any:  # type: ignore[override]
        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            word, choices = m.group(1), re.findall(r"'([^']*)'", m.group(2))
            close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
            if close:
                message = f"unknown command '{word}'; did you mean '{close[0]}'?"
            elif self.prog == "mdsearch":
                message = (f"'{word}' is not a command (one of: {', '.join(choices)}); to search "
                           f"for it: mdsearch search {shlex.quote(word)}")
        m = re.match(r"unrecognized arguments: (.*)", message)
        if m and self.suggestions:
            hints = []
            for word in m.group(1).split():
                flag = word.split("=")[0]
                if flag.startswith("--"):
                    close = difflib.get_close_matches(flag, self.suggestions, n=1, cutoff=0.7)
                    if close:
                        hints.append(f"{flag}: did you mean {close[0]}?")
            if hints:
                message += " (" + "; ".join(hints) + ")"
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _add_setting_flags(p: argparse.ArgumentParser, applies: str) -> None:
    """Flags derived from the settings declared in config.py (one declaration per setting)."""
    for info in cli_settings():
        if info.applies != applies:
            continue
        kwargs: dict[str, Any] = {"dest": info.name, "help": _flag_help(info)}
        choices = getattr(info.check, "choices", None)
        if choices:
            kwargs["choices"] = choices
        if isinstance(info.default, tuple):
            kwargs.update(action="append", metavar="GLOB")
        else:
            kwargs["metavar"] = None if choices else info.name.split("_")[-1].upper()
        p.add_argument(info.flag, **kwargs)


def _flag_help(info: SettingInfo) -> str:
    doc = info.doc.split(";")[0].rstrip(".")
    default = info.default
    if default in (None, ()) or isinstance(default, tuple):
        return doc
    return f"{doc} (default {default})"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv: debug)")
    p.add_argument("-q", "--quiet", action="store_true", help="only errors on stderr")
    _add_setting_flags(p, "index")


def _output(p: argparse.ArgumentParser, *, what: str) -> None:
    """The output options search and related share (the names rg and fd users reach for)."""
    out = p.add_argument_group("output")
    fmt = out.add_mutually_exclusive_group()
    fmt.add_argument("--format", choices=FORMATS, default=None,
                     help="text (default), json (one object per query), jsonl (one object per "
                     "hit), vimgrep (path:line:col:text) or paths")
    fmt.add_argument("--json", dest="format", action="store_const", const="json",
                     help="the same as --format json")
    fmt.add_argument("-l", "--files-with-matches", dest="format", action="store_const",
                     const="paths", help="the same as --format paths: each note once")
    out.add_argument("-k", "--limit", type=int, default=5, dest="k", metavar="N",
                     help=f"{what} to show (default 5)")
    out.add_argument("--min-score", type=float, default=None, metavar="S",
                     help="leave out hits whose similarity is below S (-1 to 1)")
    out.add_argument("--open", type=int, default=None, metavar="N",
                     help="open hit N (1 = the first) in $VISUAL/$EDITOR at its line")
    out.add_argument("--color", "--colour", choices=("auto", "always", "never"), default="auto",
                     metavar="WHEN",
                     help="colour: auto (on a terminal, unless NO_COLOR is set), always, never")


def _subparser(sub: Any, name: str, help_text: str, description: str | None = None) -> Any:
    return sub.add_parser(name, help=help_text, description=description or help_text,
                          epilog=EXAMPLES[name],
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mdsearch",
        description="Search markdown notes by meaning and by exact words, offline.",
        epilog=GETTING_STARTED,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mdsearch {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands", parser_class=_Parser)

    p = _subparser(sub, "index", "index (or update the index of) a folder of notes")
    p.add_argument("root", nargs="?", metavar="ROOT",
                   help="folder of markdown notes (default: the indexed folder you are in)")
    p.add_argument("--rebuild", action="store_true", help="drop the index and build it anew")
    p.add_argument("-y", "--yes", action="store_true",
                   help="index a home folder, / or more than --max-files notes without asking")
    _common(p)

    p = _subparser(sub, "search", "search the notes (updates their index first)")
    p.add_argument("query", nargs="?", metavar="QUERY",
                   help="text, with optional filters: path:dir/ tag:x type:md "
                   'modified:>2025-01-01 "exact phrase"')
    p.add_argument("--root", default=None, metavar="ROOT",
                   help="folder of notes (default: the nearest indexed folder at or above the "
                   "current one)")
    _output(p, what="hits")
    p.add_argument("--explain", action="store_true", help="show per-mode ranks of each hit")
    _add_setting_flags(p, "search")
    f = p.add_argument_group("filters (the same as typing them in QUERY; repeat to add more)")
    f.add_argument("--path", action="append", metavar="DIR|GLOB", help="notes under a folder")
    f.add_argument("--tag", action="append", metavar="TAG", help="notes carrying the tag")
    f.add_argument("--type", action="append", metavar="md|markdown")
    f.add_argument("--modified", action="append", metavar="WHEN",
                   help="e.g. '>2025-01-01', '<2025-06', '7d'")
    f.add_argument("--phrase", action="append", metavar="TEXT",
                   help="the section must contain this exact text")
    p.add_argument("--queries", metavar="FILE",
                   help="run every query in FILE (- for stdin; one per line, or JSON Lines with "
                   "'query'); a bad line gets its own error and the others still run")
    p.add_argument("--no-update", action="store_true", help="search the index as it is")
    p.add_argument("-y", "--yes", action="store_true",
                   help="with --root: index a home folder, / or a huge folder without asking")
    _common(p)

    p = _subparser(sub, "related", "sections of other notes related to a line of a note")
    p.add_argument("file", metavar="FILE", help="a note (the index is found from its folder)")
    p.add_argument("--line", type=int, default=1, metavar="N",
                   help="1-based line whose section is compared (default 1)")
    p.add_argument("--root", default=None, metavar="ROOT",
                   help="folder of notes (default: the nearest indexed folder holding FILE)")
    _output(p, what="related sections")
    p.add_argument("-y", "--yes", action="store_true",
                   help="with --root: index a home folder, / or a huge folder without asking")
    _common(p)

    p = _subparser(sub, "status", "what is indexed for a folder")
    p.add_argument("--root", default=None, metavar="ROOT",
                   help="folder of notes (default: the nearest indexed folder)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    _common(p)

    p = _subparser(sub, "mcp", "run the MCP server over stdio (for AI assistants)")
    p.add_argument("--root", action="append", metavar="ROOT",
                   help="folder of notes; repeat for several (default: .)")
    _common(p)
    _add_setting_flags(p, "search")

    p = _subparser(sub, "serve", "run the language server over stdio (for editors)")
    p.add_argument("--stdio", action="store_true", help="accepted for editor compatibility")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("-q", "--quiet", action="store_true")

    flags = {o for a in _walk_actions(parser) for o in a.option_strings if o.startswith("--")}
    for parser_ in (parser, *sub.choices.values()):
        parser_.suggestions = sorted(flags)
    return parser


def _walk_actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _walk_actions(child)


# ---- small helpers ------------------------------------------------------------------------------


def _settings(args: argparse.Namespace) -> Settings:
    """Settings from the flags that were given, through the same checks as client settings."""
    return settings_from_flags(
        {info.name: getattr(args, info.name, None) for info in cli_settings()}
    )


def _err(message: str) -> None:
    print(f"mdsearch: error: {message}", file=sys.stderr)


def _said(message: str) -> None:
    """A message that is not an error but must be read even with -q (what an interrupt kept)."""
    print(f"mdsearch: {message}", file=sys.stderr)


def _note(args: argparse.Namespace, message: str) -> None:
    if not getattr(args, "quiet", False):
        print(f"mdsearch: {message}", file=sys.stderr)


def _shown(path: Path) -> str:
    """A path as a person at this prompt can open it: relative to the current folder when the
    note is under it (as rg and fd print), else absolute."""
    try:
        return path.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


class _Style:
    """ANSI colours the way rg uses them (path magenta, line green, match bold red), or none."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @classmethod
    def for_stream(cls, stream: TextIO, choice: str) -> _Style:
        if choice == "never":
            return cls(False)
        if choice == "always":
            return cls(True)
        if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
            return cls(False)
        return cls(hasattr(stream, "isatty") and stream.isatty())

    def _sgr(self, code: str, text: str) -> str:
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
            return text
        restore = f"\x1b[0m\x1b[{base}m" if base else "\x1b[0m"
        out, pos = [f"\x1b[{base}m"] if base else [], 0
        for s, e in spans:
            out.append(text[pos:s])
            out.append(f"\x1b[1;31m{text[s:e]}{restore}")
            pos = e
        out.append(text[pos:])
        if base:
            out.append("\x1b[0m")
        return "".join(out)


# ---- progress -----------------------------------------------------------------------------------


class _Progress:
    """One line on stderr that says what is happening: scanning, loading the model, then a bar of
    notes committed with the chunks embedded so far (moving per embedded batch) and a clock that
    ticks while the model works. Nothing when stderr is not a terminal: logs and pipes stay
    clean."""

    BAR = 24
    TICK_S = 0.5

    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled and self.stream.isatty()
        self.started = time.monotonic()
        self.phase_text: str | None = None
        self.done = self.total = self.written = self.embedded = 0
        self.counting = False
        self._drawn = 0.0
        self._width = 0
        self._lock = threading.RLock()
        self._stop: threading.Event | None = None

    def phase(self, text: str | None) -> None:
        """Say what is happening before there are notes to count ("loading model...")."""
        self.phase_text = text
        self._draw(force=True)

    def files(self, done: int, total: int, chunks: int) -> None:
        """The indexer's progress: notes committed of the total, chunks written."""
        first = not self.counting
        self.counting = True
        if self.phase_text and self.phase_text.startswith("scanning"):
            self.phase_text = None
        self.done, self.total, self.written = done, total, chunks
        if first and done >= total:  # nothing to index: no bar flashing by before the results
            with self._lock:
                self._erase()
            return
        self._draw(force=done >= total)

    def chunks_embedded(self, n: int) -> None:
        """The model finished a batch of ``n`` chunks."""
        self.embedded += n
        self._draw()

    def say(self, message: str) -> None:
        """A line of its own above the bar (a signal received, say)."""
        with self._lock:
            drawn = self._width > 0
            self._erase()
            print(message, file=self.stream, flush=True)
            if drawn:
                self._draw(force=True)

    def _line(self) -> str:
        elapsed = int(time.monotonic() - self.started)
        clock = f"{elapsed // 60}:{elapsed % 60:02d}"
        if self.phase_text and not self.counting:
            return f"{self.phase_text} {clock}"
        frac = self.done / self.total if self.total else 1.0
        full = int(frac * self.BAR)
        bar = "█" * full + "░" * (self.BAR - full)
        text = (f"indexing {bar} {self.done}/{self.total} notes · "
                f"{self.embedded} chunks embedded · {clock}")
        return f"{text} · {self.phase_text}" if self.phase_text else text

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        with self._lock:
            now = time.monotonic()
            if not force and now - self._drawn < 0.1:
                return
            self._drawn = now
            cols = shutil.get_terminal_size((100, 24)).columns
            line = self._line()[: max(cols - 1, 10)]
            pad = " " * max(self._width - len(line), 0)
            self.stream.write("\r" + line + pad)
            self.stream.flush()
            self._width = len(line)
            if self._stop is None:
                self._stop = threading.Event()
                threading.Thread(target=self._tick, args=(self._stop,), daemon=True,
                                 name="mdsearch-progress").start()

    def _tick(self, stop: threading.Event) -> None:
        """Redraw now and then, so the clock shows the process is alive during a long step."""
        while not stop.wait(self.TICK_S):
            with self._lock:
                if stop.is_set() or not self._width:
                    if self._stop is stop:
                        self._stop = None
                    return
                self._draw(force=True)

    def _erase(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def clear(self) -> None:
        """Erase the line (before results are printed) and stop the clock."""
        with self._lock:
            if self._stop is not None:
                self._stop.set()
                self._stop = None
            self._erase()


class _ReportingEmbedder:
    """The model, telling the progress line while it loads and after each batch it embeds.

    The indexer reports per committed group of notes; embedding a group takes seconds, so the
    chunk count moves per model batch from here instead, without the indexer knowing.
    """

    BATCH = 16

    def __init__(self, inner: Any, progress: _Progress) -> None:
        self._inner = inner
        self.progress = progress

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def name(self) -> str:
        return str(self._inner.name)

    @property
    def dimension(self) -> int:
        self._ensure()
        return int(self._inner.dimension)

    @property
    def loaded(self) -> bool:
        return bool(getattr(self._inner, "loaded", True))

    def _ensure(self) -> None:
        if self.loaded:
            return
        previous = self.progress.phase_text
        self.progress.phase(f"loading model {self.name}…")
        t0 = time.monotonic()
        self._inner.load()
        log.info("model loaded in %.1fs", time.monotonic() - t0)
        self.progress.phase(previous)

    def load(self) -> None:
        self._ensure()

    def embed_documents(self, texts: Sequence[str]) -> Any:
        import numpy as np

        if not texts:
            return self._inner.embed_documents(texts)
        self._ensure()
        parts = []
        for i in range(0, len(texts), self.BATCH):
            part = self._inner.embed_documents(texts[i : i + self.BATCH])
            parts.append(part)
            self.progress.chunks_embedded(len(part))
        return np.concatenate(parts)

    def embed_query(self, text: str) -> Any:
        self._ensure()
        return self._inner.embed_query(text)


class _Signals:
    """The first SIGINT/SIGTERM asks the index run to stop after its current batch (what is
    committed stays); a second one stops at once (the index repairs itself on the next open)."""

    def __init__(self, progress: _Progress) -> None:
        self.progress = progress
        self.received: int | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def _handle(self, signum: int, _frame: Any) -> None:
        if self.received is not None:
            raise KeyboardInterrupt
        self.received = signum
        name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
        self.progress.say(f"mdsearch: {name}: stopping after the current batch "
                          f"(again to stop at once)")

    def cancelled(self) -> bool:
        return self.received is not None

    @property
    def exit_code(self) -> int:
        return EXIT_SIGTERM if self.received == signal.SIGTERM else EXIT_SIGINT


# ---- opening the right index --------------------------------------------------------------------


def _find_root(args: argparse.Namespace, settings: Settings, start: Path | None = None) -> Path:
    """``--root``, else the nearest folder at or above ``start`` (default: the current one)
    with an index, else a usage error saying how to make one. Never creates anything."""
    from mdsearch_ls.engine.api import find_index_root

    if args.root is not None:
        return Path(args.root)
    here = (start or Path.cwd()).resolve()
    found = find_index_root(here, settings.index_dir)
    if found is not None:
        return found
    if settings.index_dir:
        raise UsageError(f"no index in {settings.index_dir}: run `mdsearch index DIR "
                         f"--index-dir {settings.index_dir}` (or give --root)")
    raise UsageError(f"no index for {here} or any parent: run `mdsearch index DIR` "
                     f"(or give --root)")


def _confirm_first_index(args: argparse.Namespace, root: Path, settings: Settings) -> None:
    """Before the first index of ``root``: a home folder, ``/`` or more than ``max_files`` notes
    needs ``--yes``, and the refusal names the count (an hour of embedding, or a crawl of
    site-packages READMEs, is not what a typo should cost)."""
    from mdsearch_ls.engine.api import count_notes, has_index

    if getattr(args, "yes", False) or not root.is_dir() or has_index(root, settings):
        return
    real = root.expanduser().resolve()
    special = ("the root of the file system" if real.parent == real
               else "your home folder" if real == Path.home().resolve() else None)
    # Counted without reading a note, and bounded: a walk of / or of a home folder must not
    # take longer than the question it leads to.
    cap, seconds = 10 * settings.max_files, 5.0 if special else 20.0
    n, complete = count_notes(real, settings, stop_after=cap, seconds=seconds)
    if complete and n <= settings.max_files and not special:
        return
    if complete:
        counted = f"{n:,} notes"
    elif n > cap:
        counted = f"more than {cap:,} notes"
    else:
        counted = f"at least {n:,} notes found in {seconds:.0f} s of counting"
    if special:
        raise UsageError(f"{real} is {special} ({counted}); index the folder that holds your "
                         f"notes, or pass --yes to index it anyway")
    raise UsageError(f"{real} holds {counted} (--max-files is {settings.max_files:,}); "
                     f"pass --yes to index it anyway, or --max-files N")


class _Session:
    """What one command run shares: the progress line, the model (wrapped to report), signals."""

    def __init__(self, args: argparse.Namespace, settings: Settings) -> None:
        from mdsearch_ls.engine.api import create_embedder

        self.args = args
        self.settings = settings
        self.progress = _Progress(not args.quiet)
        self.embedder = _ReportingEmbedder(create_embedder(settings), self.progress)

    def open(self, root: Path, mode: str) -> Any:
        """The workspace of ``root``, opened as the command needs it (see ``OpenMode``).

        A command that would update first (``read-if-locked``) looks before it leaps: when a
        read-only open finds nothing changed since the last index, it searches that, without the
        writer lock or Chroma (whose import alone costs seconds), and the index is as fresh as an
        update would have made it.
        """
        from mdsearch_ls.engine.api import IndexOpenError, Workspace, has_index

        if mode == "read-if-locked" and has_index(root, self.settings):
            try:
                ws = Workspace.open(root, self.settings, "read", embedder=self.embedder)
            except IndexOpenError:  # damaged: the writer heals it below
                ws = None
            if ws is not None:
                if ws.index_state().state == "ready" and ws.pending_changes() == 0:
                    log.info("the index of %s is up to date: searching it as it is", root)
                    return ws
                ws.close()
        ws = Workspace.open(root, self.settings, mode,  # type: ignore[arg-type]
                            embedder=self.embedder)
        if ws.read_only_reason:
            _note(self.args, ws.read_only_reason)
        if ws.healed:
            _note(self.args, ws.healed)
        return ws

    def update(self, ws: Any, *, rebuild: bool = False, first: bool = False) -> tuple[Any, int]:
        """Bring the index up to date with a truthful progress line; ``(report, exit code)``,
        the code non-zero when a signal stopped the run (what was committed is said)."""
        args = self.args
        if first:
            _note(args, f"{ws.root} is not indexed yet: indexing it first (once; later runs "
                  f"only read changed notes)")
        self.progress.phase(f"scanning {_shown(ws.root)}…")
        report = None
        with _Signals(self.progress) as signals:
            try:
                report = ws.index(progress=self.progress.files, cancel=signals.cancelled,
                                  rebuild=rebuild)
            except KeyboardInterrupt:
                self.progress.clear()
                files = _committed_files(ws)
                _said(f"interrupted: {files} notes are in the index; run `mdsearch index "
                      f"{_shown(ws.root)}` to finish")
                return None, signals.exit_code if signals.received else EXIT_SIGINT
            finally:
                self.progress.clear()
        if not args.quiet:
            for warning in report.warnings:
                print(f"mdsearch: warning: {warning}", file=sys.stderr)
        if report.cancelled:
            have = report.files_unchanged + report.files_indexed
            _said(f"interrupted: {have} of {report.files_total} notes are in the index "
                  f"({report.files_indexed} indexed by this run, {report.chunks_written} chunks "
                  f"committed); run `mdsearch index {_shown(ws.root)}` to finish")
            return report, signals.exit_code
        return report, EXIT_OK


def _committed_files(ws: Any) -> int | str:
    try:
        return int(ws.status()["files"])
    except Exception:  # the run died mid-write; the next open repairs it
        return "the committed"


# ---- index --------------------------------------------------------------------------------------


def cmd_index(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.root is None:
        root = _find_root(args, settings)
        _note(args, f"updating the index of {root}")
    else:
        root = Path(args.root)
    _confirm_first_index(args, root, settings)
    session = _Session(args, settings)
    with session.open(root, "write") as ws:
        report, code = session.update(ws, rebuild=args.rebuild)
        if code:
            return code
        if not args.quiet:
            print(f"indexed {ws.root}: {report.summary()}")
    return EXIT_OK


# ---- search -------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Query:
    """One query of a run: as typed, its validated request, or why it cannot run."""

    text: str
    request: Any = None
    error: str | None = None


_PHRASE = re.compile(r'"([^"]+)"')


def _read_queries(path: str) -> Iterator[tuple[str, str | None]]:
    """``(query, error)`` per non-empty line: a line that cannot be read is an error of its own,
    never the end of the batch."""
    stream: TextIO = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115
    with stream:
        for n, line in enumerate(stream, start=1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    yield line, f"{path}:{n}: not valid JSON ({exc.msg})"
                    continue
                if not isinstance(obj, dict) or not isinstance(obj.get("query"), str):
                    yield line, f"{path}:{n}: a JSON line needs a string 'query' field"
                    continue
                yield obj["query"], None
            else:
                yield line, None


def _hit_json(hit: Any, ws: Any, rendered: Any, *, mode: str, explain: bool) -> dict[str, Any]:
    out = hit.to_json(explain=explain)
    out["line"] = hit.start_line + 1
    out["file"] = str(ws.root / hit.path)
    if mode == "keyword" or hit.score is None:
        out["score"] = None  # keyword order is BM25's; a cosine here would be a fake number
    out["keyword_rank"] = hit.keyword_rank
    out["snippet"] = rendered.text
    return out


def _score_text(hit: Any, mode: str) -> str:
    if mode == "keyword" or hit.score is None:
        rank = hit.keyword_rank
        return f"BM25 rank {rank if rank is not None else '-'}"
    return f"similarity {hit.score:.2f}"


class _Printer:
    """Writes hits in the chosen format; one per command run."""

    def __init__(self, args: argparse.Namespace, ws: Any, mode: str) -> None:
        from mdsearch_ls.engine.api import snippet, wrap

        self.args = args
        self.ws = ws
        self.mode = mode
        self.format = args.format or "text"
        self.explain = bool(getattr(args, "explain", False))
        self.style = _Style.for_stream(sys.stdout, args.color)
        self.columns = shutil.get_terminal_size((100, 24)).columns
        self._snippet, self._wrap = snippet, wrap
        self._seen_paths: set[str] = set()

    def rendered(self, hits: Sequence[Any], terms: Sequence[str], limit: int) -> list[Any]:
        """Each hit's section as plain text cut between words, its query words marked."""
        from mdsearch_ls.engine.api import Snippet, match_spans

        texts = self.ws.chunk_texts(h.chunk_id for h in hits if h.chunk_id)
        out = []
        for h in hits:
            md = texts.get(h.chunk_id)
            if md is None:  # not in the manifest (another process just rewrote it)
                text = h.snippet
                out.append(Snippet(text, tuple(match_spans(text, terms))))
            else:
                out.append(self._snippet(md, terms, limit))
        return out

    def query(self, query: str, result: Any, terms: Sequence[str], *, batch: bool,
              key: str = "query") -> None:
        hits = result.hits
        fmt = self.format
        if fmt == "json":
            rendered = self.rendered(hits, terms, 200)
            print(json.dumps({
                "query": query,
                "root": str(self.ws.root),
                "results": [_hit_json(h, self.ws, r, mode=self.mode, explain=self.explain)
                            for h, r in zip(hits, rendered, strict=True)],
                "notes": list(result.notes),
                "index": result.index.to_json(),
            }, ensure_ascii=False))
        elif fmt == "jsonl":
            rendered = self.rendered(hits, terms, 200)
            for rank, (h, r) in enumerate(zip(hits, rendered, strict=True), start=1):
                obj = {key: query, "rank": rank,
                       **_hit_json(h, self.ws, r, mode=self.mode, explain=self.explain)}
                print(json.dumps(obj, ensure_ascii=False))
        elif fmt == "vimgrep":
            rendered = self.rendered(hits, terms, 160)
            for h, r in zip(hits, rendered, strict=True):
                path = self.style.path(_shown(self.ws.root / h.path))
                text = f"{h.breadcrumb}: {self.style.marked(r.text, r.spans)}"
                print(f"{path}:{self.style.line(str(h.start_line + 1))}:1:{text}")
        elif fmt == "paths":
            for h in hits:
                shown = _shown(self.ws.root / h.path)
                if shown not in self._seen_paths:
                    self._seen_paths.add(shown)
                    print(self.style.path(shown))
        else:
            if batch:
                print(self.style.dim(f"# {query}"))
            self.text(query, hits, terms)
        sys.stdout.flush()

    def text(self, query: str, hits: Sequence[Any], terms: Sequence[str]) -> None:
        from mdsearch_ls.engine.api import match_spans

        if not hits:
            print(f"no results for {query!r}")
            return
        indent = "    "
        width = max(self.columns - len(indent), 20)
        rendered = self.rendered(hits, terms, width * 2)
        st = self.style
        for i, (h, r) in enumerate(zip(hits, rendered, strict=True), start=1):
            # path:line first: the form terminals and editors open on a click.
            start, end = h.start_line + 1, h.end_line + 1
            print(f"{i:2}. {st.path(_shown(self.ws.root / h.path))}:{st.line(str(start))}  "
                  + st.dim(f"(lines {start}-{end}, {_score_text(h, self.mode)})"))
            crumb = h.breadcrumb
            print(f"{indent}{st.marked(crumb, match_spans(crumb, terms), base='1')}")
            for line in self._wrap(r, width, 2):
                print(f"{indent}{st.marked(line.text, line.spans)}")
            if self.explain:
                e = h.explain
                print(st.dim(f"{indent}[semantic #{e.get('semantic_rank')}, keyword "
                             f"#{e.get('keyword_rank')}, title match {e.get('title_match')}, "
                             f"{e.get('fusion') or 'fused'} {e.get('fused')}]"))

    def error(self, query: str, message: str) -> None:
        if self.format in ("json", "jsonl"):
            print(json.dumps({"query": query, "error": message}, ensure_ascii=False))
            sys.stdout.flush()
        else:
            _err(f"{query!r}: {message}")


def _terms(query: str, request: Any, extra_phrases: Sequence[str] | None) -> tuple[str, ...]:
    from mdsearch_ls.engine.api import query_terms

    phrases = [*_PHRASE.findall(query), *(extra_phrases or ())]
    return query_terms(request.text if request is not None else query, phrases)


def _index_state_note(args: argparse.Namespace, index: Any) -> None:
    if index.state == "building":
        _note(args, f"note: the index is still being built ({index.files_done} of "
              f"{index.files_total} notes so far): results may be missing")
    elif index.state == "interrupted":
        _note(args, f"note: the last index run stopped early ({index.files_done} of "
              f"{index.files_total} notes); run `mdsearch index` to finish it")
    elif index.state == "empty":
        _note(args, "note: the index holds no notes yet")


def _open_in_editor(path: Path, line: int) -> int:
    """``$VISUAL``/``$EDITOR`` at ``line``: ``+LINE FILE`` (vi, vim, nvim, emacs, nano, micro,
    kak), ``-g FILE:LINE`` for VS Code and its forks, ``FILE:LINE`` for editors that take that."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        raise UsageError("--open needs $VISUAL or $EDITOR (e.g. export EDITOR=nvim)")
    cmd = shlex.split(editor)
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
        raise UsageError(f"cannot run the editor {cmd[0]!r} ($VISUAL/$EDITOR): {exc}") from None


def _maybe_open(args: argparse.Namespace, ws: Any, hits: Sequence[Any]) -> int:
    if args.open is None:
        return EXIT_OK
    if not 1 <= args.open <= len(hits):
        raise UsageError(f"--open {args.open}: there are {len(hits)} hits")
    hit = hits[args.open - 1]
    return _open_in_editor(ws.root / hit.path, hit.start_line + 1)


def _check_output_args(args: argparse.Namespace) -> None:
    if args.open is not None and args.open < 1:
        raise UsageError(f"--open: expected a hit number from 1, got {args.open}")
    if args.open is not None and getattr(args, "queries", None):
        raise UsageError("--open takes one query, not --queries")


def cmd_search(args: argparse.Namespace) -> int:
    from mdsearch_ls.engine.api import RequestError, SearchRequest

    if not args.query and not args.queries and not args.phrase:
        raise UsageError("give a QUERY, --queries FILE or --phrase TEXT "
                         "(`mdsearch search --help` has examples)")
    _check_output_args(args)
    settings = _settings(args)
    filters = {"path": args.path, "tag": args.tag, "type": args.type,
               "modified": args.modified, "phrase": args.phrase}
    filters = {k: v for k, v in filters.items() if v}

    def build(query: str) -> Any:
        return SearchRequest.build(query, k=args.k, mode=args.mode, filters=filters or None,
                                   min_score=args.min_score)

    # Every query is parsed before the index is touched: a mistyped filter is reported at once,
    # and in a batch each bad line gets its own answer while the others run.
    raw = _read_queries(args.queries) if args.queries else [(args.query or "", None)]
    queries: list[_Query] = []
    for text, problem in raw:
        q = _Query(text, error=problem)
        if problem is None:
            try:
                q.request = build(text)
            except RequestError as exc:
                if not args.queries:
                    raise
                q.error = str(exc)
        queries.append(q)

    root = _find_root(args, settings)
    first = args.root is not None and not args.no_update
    if first:
        _confirm_first_index(args, root, settings)
    session = _Session(args, settings)
    mode_open = "read" if args.no_update else "read-if-locked"
    from mdsearch_ls.engine.api import has_index

    fresh = first and not has_index(root, settings)
    with session.open(root, mode_open) as ws:
        if not args.no_update and not ws.read_only:
            report, code = session.update(ws, first=fresh)
            if code:
                return code
            if report.files_indexed or report.files_deleted:
                _note(args, f"updated the index: {report.summary()}")
        printer = _Printer(args, ws, args.mode or settings.mode)
        status = EXIT_OK
        hits: list[Any] = []
        for q in queries:
            if q.error is not None:
                printer.error(q.text, q.error)
                status = EXIT_USAGE
                continue
            try:
                result = ws.search(q.request)
            except RequestError as exc:
                if not args.queries:
                    raise
                printer.error(q.text, str(exc))
                status = EXIT_USAGE
                continue
            session.progress.clear()
            for note in result.notes:
                _note(args, f"note: {note}")
            _index_state_note(args, result.index)
            printer.query(q.text, result, _terms(q.text, q.request, args.phrase),
                          batch=bool(args.queries))
            hits = result.hits
        if status == EXIT_OK and args.open is not None:
            return _maybe_open(args, ws, hits)
    return status


# ---- related ------------------------------------------------------------------------------------


def cmd_related(args: argparse.Namespace) -> int:
    from mdsearch_ls.engine.api import RelatedRequest, has_index

    _check_output_args(args)
    if args.line < 1:
        raise UsageError(f"--line: lines are 1-based (the first line is 1), got {args.line}")
    settings = _settings(args)
    target = Path(args.file).expanduser()
    start = (target if target.is_absolute() else Path.cwd() / target).parent
    root = _find_root(args, settings, start if start.is_dir() else None)
    min_score = -1.0 if args.min_score is None else args.min_score
    request = RelatedRequest.build(args.file, args.line - 1, k=args.k, min_score=min_score)
    if args.root is not None:
        _confirm_first_index(args, root, settings)
    fresh = args.root is not None and not has_index(root, settings)
    session = _Session(args, settings)
    with session.open(root, "read-if-locked") as ws:
        if not ws.read_only:
            _report, code = session.update(ws, first=fresh)
            if code:
                return code
        rel = ws.note_path(target if target.is_absolute() else Path.cwd() / target)
        if rel is None or not (ws.root / rel).is_file():
            rel = args.file if (ws.root / args.file).is_file() else None
        if rel is None:
            raise UsageError(f"{args.file} is not a note inside {ws.root}")
        result = ws.related(dataclasses.replace(request, path=rel))
        session.progress.clear()
        printer = _Printer(args, ws, "semantic")
        fmt = printer.format
        section = result.section
        if fmt == "json":
            rendered = printer.rendered(result.hits, (), 200)
            print(json.dumps({
                "path": rel, "file": str(ws.root / rel), "line": args.line,
                "section": section.title if section else None,
                "results": [_hit_json(h, ws, r, mode="semantic", explain=False)
                            for h, r in zip(result.hits, rendered, strict=True)],
            }, ensure_ascii=False))
        elif fmt == "text":
            if section:
                print(f"related to {printer.style.path(_shown(ws.root / rel))}:"
                      f"{printer.style.line(str(section.start_line + 1))} "
                      f"{printer.style.crumb(' > '.join(section.breadcrumb))}")
            printer.text(rel, result.hits, ())
        else:
            printer.query(rel, _Related(result.hits), (), batch=False, key="related_to")
        return _maybe_open(args, ws, result.hits)


@dataclasses.dataclass
class _Related:
    hits: list[Any]
    notes: tuple[str, ...] = ()


# ---- status and serve ---------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    settings = _settings(args)
    root = _find_root(args, settings)
    session = _Session(args, settings)
    with session.open(root, "read") as ws:
        info = ws.status()
        if args.json:
            print(json.dumps(info))
        else:
            for key in ("root", "files", "chunks", "model", "index_dir", "last_update"):
                print(f"{key:12} {info[key]}")
            index = info["index"]
            state = index["state"]
            if state in ("building", "interrupted"):
                state += f" ({index['files_done']} of {index['files_total']} notes)"
            print(f"{'state':12} {state}")
    return EXIT_OK


def cmd_mcp(args: argparse.Namespace) -> int:
    from mdsearch_ls.mcp import main as mcp_main

    return mcp_main(args.root or ["."], _settings(args))


def cmd_serve(args: argparse.Namespace) -> int:
    from mdsearch_ls.lsp.server import run_stdio

    return run_stdio()


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "index": cmd_index,
    "search": cmd_search,
    "related": cmd_related,
    "status": cmd_status,
    "serve": cmd_serve,
    "mcp": cmd_mcp,
}


def exit_code(exc: BaseException) -> int:
    """The exit code a failure means, by its type (the message is already for a person)."""
    from mdsearch_ls.engine.api import (
        IndexLockedError,
        IndexOpenError,
        ModelLoadError,
        NotIndexedError,
        RequestError,
    )

    if isinstance(exc, IndexLockedError):
        return EXIT_LOCKED
    if isinstance(exc, IndexOpenError | ModelLoadError):
        return EXIT_OPEN
    if isinstance(exc, UsageError | NotIndexedError | RequestError | SettingError
                  | FileNotFoundError | NotADirectoryError | ValueError):
        return EXIT_USAGE
    return EXIT_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mdsearch``; returns the exit code instead of raising."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    configure_logging(level_from_flags(args.verbose, args.quiet),
                      prog="mdsearch-mcp" if args.command == "mcp" else "mdsearch")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    if args.command == "mcp":  # before the engine import below: initialize must not wait on it
        try:
            return cmd_mcp(args)
        except SettingError as exc:
            _err(str(exc))
            return EXIT_USAGE
    from mdsearch_ls.engine.api import MdsearchError, ModelLoadError

    started = time.perf_counter()
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        _err("interrupted; the index stays consistent and the next run continues")
        return EXIT_SIGINT
    except (UsageError, MdsearchError, ModelLoadError, SettingError, OSError,
            ValueError) as exc:
        _err(str(exc))
        return exit_code(exc)
    finally:
        log.debug("%s took %.2fs", args.command, time.perf_counter() - started)


def serve_main() -> int:
    """Entry point of ``mdsearch-ls``: the language server, whatever the arguments."""
    from mdsearch_ls.lsp.server import run_stdio

    return run_stdio()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
