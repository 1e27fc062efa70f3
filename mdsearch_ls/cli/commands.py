"""The commands themselves: ``index``, ``search``, ``related``, ``status``, ``serve``, ``mcp`` and
``background``, each a function of the parsed arguments that returns an exit code (``COMMANDS``
maps the names).

Every command that reads an index reaches it the one way the engine offers
(:class:`~mdsearch_ls.engine.api.Folders`): the process that holds the index answers; when none
does, ``search`` and ``related`` ask the background process to hold it (starting it, and saying
so) unless it is switched off, and every other command, or a search with the background process
off, holds the index itself for its own run. Whoever answered, the results are printed here, by
this process's own printer.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from mdsearch_ls.cli import background
from mdsearch_ls.cli.common import (
    EXIT_NOTHING,
    EXIT_OK,
    UsageError,
    _note,
    _said,
    _settings,
    _shown,
    given_index_settings,
)
from mdsearch_ls.cli.install import cmd_install
from mdsearch_ls.cli.mcp_config import print_config
from mdsearch_ls.cli.output import (
    QueryFailed,
    _check_output_args,
    _hit_json,
    _maybe_open,
    _Printer,
    print_queries,
)
from mdsearch_ls.cli.progress import _Progress, _ReportingEmbedder, _Signals
from mdsearch_ls.config import Settings
from mdsearch_ls.engine.api import (
    Folders,
    IndexedFolder,
    IndexReport,
    RelatedRequest,
    RequestError,
    SearchRequest,
    broad_root_reason,
    create_embedder,
    find_index_root,
    has_index,
    index_formats,
    not_indexed_reason,
)

# ---- which index, reached how -------------------------------------------------------------------


def _find_root(args: argparse.Namespace, settings: Settings, start: Path | None = None) -> Path:
    """``--root``, else the nearest folder at or above ``start`` (default: the current one)
    with an index, else a usage error saying how to make one. Never creates anything."""
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
    if getattr(args, "yes", False) or not root.is_dir() or has_index(root, settings):
        return
    found = broad_root_reason(root, settings, "--max-files")
    if found is None:
        return
    reason, special = found
    if not special:
        raise UsageError(f"{reason}; pass --yes to index it anyway, or --max-files N")
    raise UsageError(f"{reason}; index the folder that holds your notes, or pass --yes to "
                     f"index it anyway")


class _Session:
    """What one command run shares: the progress line, the model (wrapped to report), and the
    one folder it works on, reached the engine's way."""

    def __init__(self, args: argparse.Namespace, settings: Settings, *,
                 ask_background: bool) -> None:
        self.args = args
        self.settings = settings
        self.progress = _Progress(not args.quiet)
        self.folders = Folders(
            settings, embedder=_ReportingEmbedder(create_embedder(settings), self.progress),
            role="command", via_background=ask_background and background.wanted(args),
            watch=False, on_message=self._say)

    def _say(self, text: str, level: str) -> None:
        if level == "notice":
            self.progress.clear()
            _said(text.removeprefix("mdsearch: "))
        elif level != "error":  # (an error is raised too, and said once, with its exit code)
            _note(self.args, text.removeprefix("mdsearch: "))

    def open(self, root: Path) -> IndexedFolder:
        """The folder of ``root``, its index held here or by the process that answers for it.
        Without ``--include-formats``, with the formats the index was last built with: a search
        must not drop the PDFs that ``mdsearch index --include-formats pdf`` put in
        (``--include-formats none`` turns them off)."""
        if getattr(self.args, "include_formats", None) is None:
            kept = index_formats(root, self.settings)
            if kept and kept != self.settings.include_formats:
                self.settings = dataclasses.replace(self.settings, include_formats=kept)
        folder = self.folders.add(root, self.settings, given=given_index_settings(self.args))
        if folder is None:
            raise FileNotFoundError(f"notes folder not found: {root}")
        folder.open_now()
        return folder

    def update(self, folder: IndexedFolder, *, rebuild: bool = False) -> tuple[IndexReport | None,
                                                                               int]:
        """Bring the index up to date (here, or by its holder) with a truthful progress line;
        ``(report, exit code)``, the code non-zero when a signal stopped the run (what was
        committed is said)."""
        args = self.args
        self.progress.phase(f"scanning {_shown(folder.root)}…")
        with _Signals(self.progress) as signals:

            def progress(done: int, total: int, chunks: int) -> None:
                if signals.cancelled() and not folder.held:
                    raise KeyboardInterrupt  # the holder stops when its asker is gone
                self.progress.files(done, total, chunks)

            try:
                report = folder.index_now(rebuild=rebuild, progress=progress,
                                          cancel=signals.cancelled)
            except KeyboardInterrupt:
                self.progress.clear()
                if not folder.held:
                    _said(f"interrupted: the process that holds the index stops after its "
                          f"current batch; run `mdsearch index {_shown(folder.root)}` to finish")
                else:
                    _said(f"interrupted: {folder.status()['files']} notes are in the index; run "
                          f"`mdsearch index {_shown(folder.root)}` to finish")
                return None, signals.exit_code if signals.received else 130
            finally:
                self.progress.clear()
        if not args.quiet:
            for warning in report.warnings:
                print(f"mdsearch: warning: {warning}", file=sys.stderr)
        if report.cancelled:
            have = report.files_unchanged + report.files_indexed
            _said(f"interrupted: {have} of {report.files_total} notes are in the index "
                  f"({report.files_indexed} indexed by this run, {report.chunks_written} chunks "
                  f"committed); run `mdsearch index {_shown(folder.root)}` to finish")
            return report, signals.exit_code
        return report, EXIT_OK

    def close(self) -> None:
        self.progress.clear()
        self.folders.close(timeout=60.0)

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- index --------------------------------------------------------------------------------------


def cmd_index(args: argparse.Namespace) -> int:
    settings = _settings(args)
    if args.root is None:
        root = _find_root(args, settings)
        _note(args, f"updating the index of {root}")
    else:
        root = Path(args.root)
    _confirm_first_index(args, root, settings)
    with _Session(args, settings, ask_background=False) as session:
        folder = session.open(root)
        report, code = session.update(folder, rebuild=args.rebuild)
        if code or report is None:
            return code
        if not args.quiet:
            print(f"indexed {folder.root}: {report.summary()}")
    return EXIT_OK


# ---- search -------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Query:
    """One query of a run: as typed, its validated request, or why it cannot run."""

    text: str
    request: SearchRequest | None = None
    error: str | None = None


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


def _index_state_note(index: Any) -> str | None:
    """What a search's answer must say about an index that is not whole, or None."""
    if index.state == "building":
        return (f"note: the index is still being built ({index.files_done} of "
                f"{index.files_total} notes so far): results may be missing")
    if index.state == "interrupted":
        return (f"note: the last index run stopped early ({index.files_done} of "
                f"{index.files_total} notes); run `mdsearch index` to finish it")
    if index.state == "empty":
        return "note: the index holds no notes yet"
    return None


FLAGS = {"limit": "-k/--limit", "min_score": "--min-score", "mode": "--mode", "line": "--line",
         "filters": "--path/--tag/--type/--modified/--phrase"}
"""The flag that sets each field of a request: an error names what the person typed."""


def _flagged(exc: RequestError) -> UsageError:
    """The engine's refusal of a field, naming the flag that set it instead."""
    field = (exc.field or "").split(".")[0]
    flag = FLAGS.get(field)
    text = str(exc)
    return UsageError(text.replace(f"'{exc.field}'", flag, 1) if flag else text)


def search_queries(args: argparse.Namespace) -> tuple[list[_Query], dict[str, Any]]:
    """The queries of a search run, each parsed (or why not), and its filter flags: checked
    before any index is touched."""
    if not args.query and not args.queries and not args.phrase:
        raise UsageError("give a QUERY, --queries FILE or --phrase TEXT "
                         "(`mdsearch search --help` has examples)")
    _check_output_args(args)
    filters = {"path": args.path, "tag": args.tag, "type": args.type,
               "modified": args.modified, "phrase": args.phrase}
    filters = {k: v for k, v in filters.items() if v}
    # Every query is parsed before the index is touched: a mistyped filter is reported at once,
    # and in a batch each bad line gets its own answer while the others run.
    raw = _read_queries(args.queries) if args.queries else [(args.query or "", None)]
    queries: list[_Query] = []
    for text, problem in raw:
        q = _Query(text, error=problem)
        if problem is None:
            try:
                q.request = SearchRequest.build(text, k=args.k, mode=args.mode,
                                                filters=filters or None,
                                                min_score=args.min_score)
            except RequestError as exc:
                if not args.queries:
                    raise _flagged(exc) from None
                q.error = str(exc)
        queries.append(q)
    return queries, filters


def cmd_search(args: argparse.Namespace) -> int:
    queries, _filters = search_queries(args)
    settings = _settings(args)
    if args.server:
        from mdsearch_ls.cli import remote  # (the MCP SDK's client: 0.3 s, for --server alone)

        return remote.run(args, queries)
    root = _find_root(args, settings)
    first = not has_index(root, settings)
    if first and args.no_update:  # a read never creates an index: it says how to make one
        raise UsageError(not_indexed_reason(root, settings))
    if first:
        _confirm_first_index(args, root, settings)
    with _Session(args, settings, ask_background=not first) as session:
        folder = session.open(root)
        if folder.held and not args.no_update:
            if first:
                _note(args, f"{folder.root} is not indexed yet: indexing it first (once; "
                      f"later runs only read changed notes)")
            report, code = session.update(folder)
            if code:
                return code
            if not first and report is not None and (report.files_indexed
                                                     or report.files_deleted):
                _note(args, f"updated the index: {report.summary()}")
        printer = _Printer(args, folder.root, args.mode or settings.mode)

        def search(q: _Query) -> Any:
            try:
                return folder.search(q.request)  # type: ignore[arg-type]
            except RequestError as exc:
                if not args.queries:
                    raise  # alone, the engine's own error (exit 2, its message)
                raise QueryFailed(str(exc)) from None

        status, hits = print_queries(args, printer, queries, search, _index_state_note)
        if status == EXIT_OK and args.open is not None:
            return _maybe_open(args, folder.root, hits)
    if first and status == EXIT_OK:
        # after the results: the index exists now, and the background process keeps it
        background.start_after_first_index(args, settings, root)
    return status


# ---- related ------------------------------------------------------------------------------------


def cmd_related(args: argparse.Namespace) -> int:
    _check_output_args(args)
    if args.line < 1:
        raise UsageError(f"--line: lines are 1-based (the first line is 1), got {args.line}")
    settings = _settings(args)
    target = Path(args.file).expanduser()
    target = target if target.is_absolute() else Path.cwd() / target
    root = _find_root(args, settings, target.parent if target.parent.is_dir() else None)
    min_score = -1.0 if args.min_score is None else args.min_score
    try:
        request = RelatedRequest.build(args.file, args.line - 1, k=args.k, min_score=min_score)
    except RequestError as exc:
        raise _flagged(exc) from None
    first = not has_index(root, settings)
    if first:
        _confirm_first_index(args, root, settings)
    with _Session(args, settings, ask_background=not first) as session:
        folder = session.open(root)
        if folder.held:
            _report, code = session.update(folder)
            if code:
                return code
        rel = folder.note_path(target)
        if rel is None or not (folder.root / rel).is_file():
            rel = args.file if (folder.root / args.file).is_file() else None
        if rel is None:
            raise UsageError(f"{args.file} is not a note inside {folder.root}")
        result = folder.related(dataclasses.replace(request, path=rel))
        printer = _Printer(args, folder.root, "semantic")
        section = result.section
        if printer.format == "json":
            rendered = printer.rendered(result.hits, (), 200)
            print(json.dumps({
                "path": rel, "file": str(folder.root / rel), "line": args.line,
                "section": section.title if section else None,
                "results": [_hit_json(h, folder.root, r, mode="semantic", explain=False)
                            for h, r in zip(result.hits, rendered, strict=True)],
            }, ensure_ascii=False))
        elif printer.format == "text":
            if section:
                print(f"related to {printer.style.path(_shown(folder.root / rel))}:"
                      f"{printer.style.line(str(section.start_line + 1))} "
                      f"{printer.style.crumb(' > '.join(section.breadcrumb))}")
            printer.text(rel, result.hits, ())
        else:
            printer.query(rel, _Related(result.hits), (), batch=False, key="related_to")
        if not result.hits:
            return EXIT_NOTHING
        return _maybe_open(args, folder.root, result.hits)


@dataclasses.dataclass
class _Related:
    """``related``'s hits as the printer reads a search's result."""

    hits: list[Any]
    notes: tuple[str, ...] = ()


# ---- status and serve ---------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    settings = _settings(args)
    root = _find_root(args, settings)
    if not has_index(root, settings):  # (as for search --no-update)
        raise UsageError(not_indexed_reason(root, settings))
    with _Session(args, settings, ask_background=False) as session:
        info = session.open(root).status()
    held = info.get("held_by")
    if held and held.get("pid") == os.getpid():
        info["held_by"] = None  # this command, for its own run: nothing holds it otherwise
    if args.json:
        print(json.dumps(info))
        return EXIT_OK
    for key in ("root", "files", "chunks", "model", "index_dir", "last_update"):
        print(f"{key:12} {info[key]}")
    index = info["index"]
    state = index["state"]
    if state in ("building", "interrupted"):
        state += f" ({index['files_done']} of {index['files_total']} notes)"
    print(f"{'state':12} {state}")
    held = info["held_by"]
    if held is None:
        who = "nothing: " + ("each search holds it for its own run" if not background.wanted(args)
                             else "the next search starts the background process")
    else:
        what = "the background process" if held["role"] == "background" else f"a {held['role']}"
        who = f"{what} (pid {held['pid']})"
    print(f"{'held by':12} {who}")
    return EXIT_OK


def _started_by_hand(what: str, client: str) -> None:
    """A server started at a prompt rather than by its client: say what it waits for, and let
    the first Ctrl-C stop it (a protocol server otherwise waits on stdin for good)."""
    if not sys.stdin.isatty():
        return
    _said(f"{what} waits for {client} on stdin (it speaks a protocol, not to a person); "
          f"Ctrl-C stops it")
    signal.signal(signal.SIGINT, lambda *_: os._exit(130))


def cmd_mcp(args: argparse.Namespace) -> int:
    if args.print_config:
        return print_config(args)
    from mdsearch_ls.mcp.server import run as mcp_run  # (the MCP SDK: 0.3 s, for serving alone)

    if args.http is None:
        _started_by_hand("mdsearch mcp, an MCP server,", "an AI assistant (an MCP client)")
    settings = _settings(args)
    if args.yes:
        settings = dataclasses.replace(settings, allow_any_root=True)
    return mcp_run(args.root or ["."], settings, http=args.http,
                   token_file=args.token_file, allow_hosts=args.allow_host or [])


def cmd_serve(args: argparse.Namespace) -> int:
    from mdsearch_ls.lsp.app import run_stdio  # (pygls and lsprotocol, for this command alone)

    _started_by_hand("mdsearch serve, a language server,", "an editor (an LSP client)")
    return run_stdio()


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "index": cmd_index,
    "search": cmd_search,
    "related": cmd_related,
    "status": cmd_status,
    "serve": cmd_serve,
    "mcp": cmd_mcp,
    "background": background.cmd_background,
    "install": cmd_install,
}
