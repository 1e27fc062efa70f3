"""The command line: argparse set-up, the help epilogs with examples, the flags derived from the
settings declared in ``config.py``, and a parser that suggests the command or flag a typo was
meant to be.

Only the standard library and ``config`` are imported here: ``mdsearch --help`` does not wait
on the engine."""

from __future__ import annotations

import argparse
import difflib
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from typing import Any

from mdsearch_ls import __version__
from mdsearch_ls.cli.common import EXIT_USAGE, FORMATS
from mdsearch_ls.cli.install import EXTRAS
from mdsearch_ls.config import SettingInfo, cli_settings

MCP_CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode", "codex", "zed", "windsurf")
"""The clients ``mdsearch mcp --print-config`` prints an entry for (``cli/mcp_config.py``)."""

MCP_DOCS_URL = "https://github.com/mdsearch/mdsearch/blob/main/docs/mcp.md"
"""Where ``mdsearch mcp --help`` sends a reader: the wheel ships no docs folder, and the page's
links (to the benchmarks, the tests) work on the repository's site."""

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
  MDSEARCH_TOKEN=… mdsearch search "backup keys" --server http://handbook.lan:8765/mcp

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
    "mcp": f"""\
examples:
  mdsearch mcp --root ~/notes                 what an AI assistant starts (stdio)
  mdsearch mcp --root ~/notes --print-config claude-desktop
                                              the entry for that client's configuration
  mdsearch mcp --root ~/notes --root ~/work   several folders, searched as one set
  mdsearch mcp --root ~/handbook --http 0.0.0.0:8765 --token-file ~/.config/mdsearch/team
                                              one index for a team

Every client's entry, the tools and the team server: {MCP_DOCS_URL}""",
    "background": """\
examples:
  mdsearch background --stop                let this folder's index go
  mdsearch background --stop --all          stop the background process
  MDSEARCH_BACKGROUND=off                   (in your shell's profile) never start one

A search of an index that no process holds starts this process (one per user: a search of
another folder asks it to hold that one too) and asks it, and says so; it keeps the index loaded
and watches the notes, so the next searches answer at once. It lets a folder go after --idle
minutes without a search (and exits with the last), and gives an index up to an editor's
language server or an MCP server that opens the folder. Its log is background.log in the index
folder of the search that started it.""",
    "install": """\
examples:
  mdsearch install formats                  PDF, Word, HTML and Org documents (include_formats)
  mdsearch install multilingual             the multilingual model (model = multilingual)
  mdsearch install torch                    the torch backend (embedder.backend = torch)

Installs into the environment mdsearch runs in (pipx's, uv tool's, a virtual environment's) with
its own pip, or with uv where that environment has no pip.""",
    "serve": """\
examples:
  mdsearch serve              what an editor starts (stdio); see the README for VS Code,
                              Neovim and Helix set-ups""",
}


class _Parser(argparse.ArgumentParser):
    """argparse that suggests the command or flag a typo was meant to be."""

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
        if m:
            hints = []
            flags = _every_flag()
            for word in m.group(1).split():
                flag = word.split("=")[0]
                if flag.startswith("--"):
                    close = difflib.get_close_matches(flag, flags, n=1, cutoff=0.7)
                    if close and close[0] == flag:  # a flag of another command
                        hints.append(f"{flag} is not an option of this command")
                    elif close:
                        hints.append(f"{flag}: did you mean {close[0]}?")
            if any(not w.startswith("-") for w in m.group(1).split()):
                hints.append("a query of several words is one argument: put it in quotes, as "
                             "in mdsearch search \"how do I rotate the backup keys\"")
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
            kwargs.update(action="append", metavar=getattr(info.check, "metavar", "GLOB"))
        else:
            kwargs["metavar"] = None if choices else info.name.split("_")[-1].upper()
        p.add_argument(info.flag, **kwargs)


def _flag_help(info: SettingInfo) -> str:
    doc = info.doc.rstrip(".").replace("%", "%%")
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


def _subparser(sub: Any, name: str, help_text: str,
               fill: Callable[[argparse.ArgumentParser], None]) -> None:
    """A command's parser, its arguments added by ``fill``."""
    fill(sub.add_parser(name, help=help_text, description=help_text, epilog=EXAMPLES[name],
                        formatter_class=argparse.RawDescriptionHelpFormatter))


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
    _subparser(sub, "index", "index (or update the index of) a folder of notes", _index_args)
    _subparser(sub, "search", "search the notes (updates their index first)", _search_args)
    _subparser(sub, "related", "sections of other notes related to a line of a note",
               _related_args)
    _subparser(sub, "status", "what is indexed for a folder", _status_args)
    _subparser(sub, "mcp", "run the MCP server over stdio or HTTP (for AI assistants)",
               _mcp_args)
    _subparser(sub, "background", "the process that keeps a folder's index loaded for the "
               "command line (a search starts it; this runs it in the foreground)",
               _background_args)
    _subparser(sub, "serve", "run the language server over stdio (for editors)", _serve_args)
    _subparser(sub, "install", "install an optional part (formats, multilingual, torch) into "
               "mdsearch's own environment", _install_args)
    return parser


def _index_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("root", nargs="?", metavar="ROOT",
                   help="folder of markdown notes (default: the indexed folder you are in)")
    p.add_argument("--rebuild", action="store_true", help="drop the index and build it anew")
    p.add_argument("-y", "--yes", action="store_true",
                   help="index a home folder, / or more than --max-files notes without asking")
    _common(p)


def _search_args(p: argparse.ArgumentParser) -> None:
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
    f.add_argument("--type", action="append", metavar="md|pdf|docx|html|ipynb|org")
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
    p.add_argument("--no-background", action="store_true",
                   help="do not start a background process that keeps the index loaded for "
                   "the next searches (a search answered here starts one by default and says "
                   "so; MDSEARCH_BACKGROUND=off: never)")
    r = p.add_argument_group("a team's server (mdsearch mcp --http on another machine)")
    r.add_argument("--server", metavar="URL", default=None,
                   help="search that server's index instead of a local one, e.g. "
                   "http://handbook.lan:8765/mcp")
    r.add_argument("--token-file", metavar="FILE", default=None,
                   help="file holding your token for --server (default: $MDSEARCH_TOKEN)")
    _common(p)


def _related_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="a note (the index is found from its folder)")
    p.add_argument("--line", type=int, default=1, metavar="N",
                   help="1-based line whose section is compared (default 1)")
    p.add_argument("--root", default=None, metavar="ROOT",
                   help="folder of notes (default: the nearest indexed folder holding FILE)")
    _output(p, what="related sections")
    p.add_argument("-y", "--yes", action="store_true",
                   help="with --root: index a home folder, / or a huge folder without asking")
    _common(p)


def _status_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", default=None, metavar="ROOT",
                   help="folder of notes (default: the nearest indexed folder)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    _common(p)


def _mcp_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", action="append", metavar="ROOT",
                   help="folder of notes; repeat for several (default: .)")
    p.add_argument("--http", metavar="HOST:PORT", default=None,
                   help="serve streamable HTTP at HOST:PORT (PORT alone: 127.0.0.1) instead of "
                        "stdio")
    p.add_argument("--token-file", metavar="FILE", default=None,
                   help="members allowed over HTTP, one 'NAME TOKEN' a line; re-read when it "
                        "changes (needed beyond 127.0.0.1)")
    p.add_argument("-y", "--yes", action="store_true",
                   help="index a root even when it is /, the home folder or holds more than "
                        "--max-files notes (refused otherwise)")
    p.add_argument("--allow-host", action="append", metavar="NAME",
                   help="a Host name clients use to reach this server (beside this machine's "
                        "names); repeat for several")
    p.add_argument("--print-config", choices=MCP_CLIENTS, metavar="CLIENT",
                   help="print the entry that client's configuration needs to start this "
                        "server with these options and folders, and where it goes; start "
                        f"nothing. CLIENT: {', '.join(MCP_CLIENTS)}")
    _common(p)
    _add_setting_flags(p, "search")


def _background_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("root", nargs="?", metavar="ROOT",
                   help="folder of notes (default: the nearest indexed folder)")
    p.add_argument("--stop", action="store_true",
                   help="ask the background process to let this folder's index go")
    p.add_argument("--all", action="store_true",
                   help="with --stop: every folder, and the background process exits")
    p.add_argument("--idle", type=float, default=15.0, metavar="MINUTES",
                   help="exit after this long without a search (default 15)")
    p.add_argument("--settings-json", default=None, help=argparse.SUPPRESS)
    _common(p)
    _add_setting_flags(p, "search")


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stdio", action="store_true", help="accepted for editor compatibility")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("-q", "--quiet", action="store_true")


def _install_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("extra", nargs="+", choices=tuple(EXTRAS), metavar="EXTRA",
                   help=f"{', '.join(EXTRAS)} (several at once: formats multilingual)")
    p.add_argument("-v", "--verbose", action="count", default=0)
    p.add_argument("-q", "--quiet", action="store_true")


def _every_flag() -> list[str]:
    """Every command's ``--flags``, sorted: what a mistyped flag is compared with."""
    flags = {o for a in _walk_actions(build_parser()) for o in a.option_strings
             if o.startswith("--")}
    return sorted(flags)


def _walk_actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _walk_actions(child)
