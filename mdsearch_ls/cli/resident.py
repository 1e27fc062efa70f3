"""``mdsearch search`` and ``mdsearch index`` through the process that already holds the index,
when one does.

A language server, an MCP server or the background process (:mod:`.background`) writing a
folder's index listens on a socket beside it (see
:mod:`mdsearch_ls.engine.service.resident`); asking it costs a connection instead of loading
numpy, ONNX Runtime, the model and the index's tables. The output is the in-process search's,
printed by the same printer from the same fields. Whenever the server cannot answer exactly as an
in-process search would (no socket, a server of another version, other ranking settings, an
error, no answer in time) this returns None and the CLI searches by itself, as before: the
socket is a shortcut, never a dependency. ``--no-resident`` (or the ``resident`` setting off on
the server) skips it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mdsearch_ls.cli import early
from mdsearch_ls.cli.common import EXIT_OK, log
from mdsearch_ls.cli.output import QueryFailed, Terminal, _maybe_open, _Printer, print_queries
from mdsearch_ls.cli.remote import RemoteIndex, RemoteResult, RemoteView, make_hit
from mdsearch_ls.cli.session import READ, with_remembered_formats
from mdsearch_ls.config import Settings


def ask(index_dir: Path, request: dict[str, Any], want: str = "results",
        meanwhile: Callable[[], None] | None = None) -> dict[str, Any] | None:
    """The server's answer to one request (one holding ``want``), or None (no server, or it
    did not answer or take the request: the CLI then does it in process). ``meanwhile``: work
    of this process's own, done once the request is sent, while the server answers it. The
    question :mod:`.early` sent before the CLI was imported is taken when it is this one."""
    from mdsearch_ls.engine.api import ranking_settings, resident_socket_path, send_socket

    path = resident_socket_path(index_dir)
    answered = early.take(path, request, ranking_settings(Settings()))
    if answered is not None:
        answer = _read(answered, meanwhile)
        if answer is None or not answer.get("refused"):
            return _taken(answer, want)
        # a server of a release before the question sent ahead: asked as before
        log.info("the server did not take the question sent ahead (%s): asking again",
                 answer["refused"])
        meanwhile = None
    answered = send_socket(path, index_dir, request, timeout=early.ANSWER_S,
                           connect_timeout=early.CONNECT_S)
    return None if answered is None else _taken(_read(answered, meanwhile), want)


def _read(answered: Callable[[], dict[str, Any] | None],
          meanwhile: Callable[[], None] | None) -> dict[str, Any] | None:
    try:
        if meanwhile is not None:
            meanwhile()
    finally:
        answer = answered()
    return answer


def _taken(answer: dict[str, Any] | None, want: str) -> dict[str, Any] | None:
    if answer is None:
        return None
    if answer.get("refused") or want not in answer:
        log.info("the server did not take the request (%s): doing it in process",
                 answer.get("refused") or "no answer")
        return None
    return answer


def run(args: argparse.Namespace, settings: Settings, root: Path, queries: list[Any],
        filters: dict[str, Any], index_note: Any) -> int | None:
    """Search through the index's server and print as an in-process search prints; the exit
    code, or None when the CLI must search by itself."""
    from mdsearch_ls.engine.api import PROTOCOL_RESIDENT, index_dir_of, ranking_settings

    asked = [q for q in queries if q.error is None]
    request = {
        "v": PROTOCOL_RESIDENT, "settings": ranking_settings(settings),
        "update": not args.no_update,
        "queries": [{"query": q.text, "k": args.k, "mode": args.mode, "filters": filters or None,
                     "min_score": args.min_score} for q in asked],
    }
    index_dir = index_dir_of(root, settings)
    answer = ask(index_dir, request, meanwhile=_printing)
    # The formats the index remembers count as the session counts them: the server says which
    # (an older one does not: read here); asked with others, ask again with those.
    stored = answer["index_formats"] if answer and "index_formats" in answer else READ
    remembered = with_remembered_formats(args, settings, root, stored)
    if remembered is not settings:
        settings = remembered
        answer = ask(index_dir, {**request, "settings": ranking_settings(settings)})
    if answer is None or len(answer["results"]) != len(asked):
        return None
    log.info("searched through the mdsearch server (process %s) that holds the index; it "
             "checked %s for changes first", answer.get("pid"), answer.get("checked", "?"))
    return print_answer(args, settings, root, queries, answer, index_note)


def print_answer(args: argparse.Namespace, settings: Settings, root: Path, queries: list[Any],
                 answer: dict[str, Any], index_note: Any, term: Terminal | None = None) -> int:
    """Print a server's answer to ``queries`` as an in-process search prints; the exit code.
    ``term``: another terminal than this process's (a server printing for a CLI)."""
    asked = [q for q in queries if q.error is None]
    view = RemoteView(root.resolve())
    answers = dict(zip(map(id, asked), answer["results"], strict=True))

    def search(q: Any) -> RemoteResult:
        res = answers[id(q)]
        if "error" in res:
            raise QueryFailed(str(res["error"]))
        return RemoteResult([_hit(view, h) for h in res["hits"]], tuple(res.get("notes") or ()),
                            RemoteIndex(dict(res.get("index") or {})))

    printer = _Printer(args, view, args.mode or settings.mode, term)
    status, hits = print_queries(args, printer, queries, search, index_note)
    if status == EXIT_OK and args.open is not None:
        return _maybe_open(args, view, hits)
    return status


def run_index(args: argparse.Namespace, settings: Settings, root: Path) -> int | None:
    """``mdsearch index`` answered by the server that holds the index: it looks for changes
    (with its watch where it has one), writes them on its writer thread and reports what it
    wrote, printed as a run here prints it; None when the CLI must index by itself."""
    from mdsearch_ls.engine.api import PROTOCOL_RESIDENT, has_index, index_dir_of, ranking_settings

    settings = with_remembered_formats(args, settings, root)
    if not has_index(root, settings):
        return None
    answer = ask(index_dir_of(root, settings),
                 {"v": PROTOCOL_RESIDENT, "settings": ranking_settings(settings), "index": True},
                 want="summary")
    if answer is None:
        return None
    log.info("indexed through the mdsearch server (process %s) that holds the index; it "
             "checked %s for changes", answer.get("pid"), answer.get("checked", "?"))
    if not args.quiet:
        for warning in answer.get("warnings") or ():
            print(f"mdsearch: warning: {warning}", file=sys.stderr)
        done = "" if answer.get("changed") else " (nothing had changed)"
        print(f"indexed {root.resolve()}: {answer['summary']}{done}")
    return EXIT_OK


def run_status(args: argparse.Namespace, settings: Settings, root: Path
               ) -> dict[str, Any] | None:
    """``mdsearch status`` as the server that holds the index reads it (the index's counts
    and state, as it stands: nothing is looked at first), with who that server is; None when
    none answers, and the CLI reads the index itself. Asked so, it imports none of the engine's
    index modules: a third of that process's time (76 against 121 ms at 8k chunks)."""
    from mdsearch_ls.engine.api import PROTOCOL_RESIDENT, has_index, index_dir_of, ranking_settings

    settings = with_remembered_formats(args, settings, root)
    if not has_index(root, settings):
        return None
    index_dir = index_dir_of(root, settings)
    answer = ask(index_dir, {"v": PROTOCOL_RESIDENT, "settings": ranking_settings(settings),
                             "status": True}, want="status")
    if answer is None:
        return None
    log.info("status from the mdsearch server (process %s) that holds the index",
             answer.get("pid"))
    return {**answer["status"], "served_by": served_by(index_dir, answer)}


def served_by(index_dir: Path, who: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The process that answers this index's searches through its socket (``who``: its answer,
    when it has given one), if one does: a person should be able to see what runs on their
    behalf."""
    from mdsearch_ls.engine.api import PROTOCOL_RESIDENT, resident_socket_path

    if who is None:
        who = ask(index_dir, {"v": PROTOCOL_RESIDENT, "who": True}, want="pid")
    if who is None:
        return None
    return {"pid": who["pid"], "background": bool(who.get("background")),
            "socket": str(resident_socket_path(index_dir))}


def _printing() -> None:
    """What printing an answer needs (the engine's ``Hit``, the snippet and highlighting
    functions), imported while the server searches: ~5 ms of this process that would otherwise
    follow the answer, and a server holding 96k chunks takes 50-70 ms to give it."""
    from mdsearch_ls.engine.api import Hit, window  # noqa: F401


def _hit(view: RemoteView, h: dict[str, Any]) -> Any:
    cid = str(h.get("chunk_id") or "")
    if h.get("text") is not None and cid:
        view.texts[cid] = str(h["text"])
    if h.get("plain") is not None and cid:
        view.plains[cid] = str(h["plain"])
    return make_hit(path=str(h["path"]), title=str(h["title"]),
                    start_line=int(h["start_line"]), end_line=int(h["end_line"]),
                    breadcrumb=str(h["breadcrumb"]), score=h.get("score"),
                    keyword_rank=h.get("keyword_rank"), snippet=str(h.get("snippet") or ""),
                    chunk_id=cid, explain=h.get("explain"))


