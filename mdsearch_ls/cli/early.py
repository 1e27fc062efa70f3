"""``mdsearch search QUERY`` answered by the server that holds the index before the rest of the
CLI is imported.

A search that a server answers used to spend most of its process importing the CLI (argparse,
the settings' dataclasses, the query parser, the printer: 50-70 ms) before it even asked. For
the plain form, a query and output flags, this module finds the index the way the CLI does
(``engine/index/place.py``, on strings: no ``pathlib``, ``re`` or ``json`` is imported before
the question is sent) and sends the request the CLI would send with the default settings, with
its arguments, folder and terminal. The server searches and prints the
answer with the CLI's own printer for that terminal (``cli/rendering.py``); this writes what
comes back and the process ends. A server that cannot print it (one started without the CLI,
of another release, a flag only the CLI can honour) still answers the question: the CLI then
runs as before and, when it comes to ask (``cli/resident.py``) the same question, takes this
answer instead of asking again. Any other request (a flag this does not know, other settings,
another folder) drops this one unread, so what is printed never depends on this guess.

The standard library's builtins and those rules only (through the engine's seam, whose names
load lazily), and nothing said: logging is not set up yet, and a guess that fails is simply not
used. ``tests/unit/test_resident_client.py`` holds both paths to a stand-in server, and
``tests/integration/test_background.py`` the printed bytes to a search in process.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: nothing is imported before the question is sent
if TYPE_CHECKING:
    from pathlib import Path

CONNECT_S = 2.0
ANSWER_S = 90.0
"""The server may bring the index up to date first (as a local search would): wait for that,
but not for a server that has stopped answering; then search in process."""

_FLAGS = frozenset({"-q", "--quiet", "--json", "-l", "--files-with-matches", "--explain", "-y",
                    "--yes", "--no-background"})
"""Flags that change nothing of the request: output, a first index's confirmation (``-v`` is
not one: what it logs is the CLI's to say)."""
_VALUED = {"--format": ("text", "json", "jsonl", "vimgrep", "paths"),
           "--color": ("auto", "always", "never"), "--colour": ("auto", "always", "never"),
           "--mode": ("hybrid", "semantic", "keyword"), "--open": None, "-k": None,
           "--limit": None}
"""Flags with a value (the choices argparse takes, or None: a number)."""

_sent: tuple[str, dict, object] | None = None


def search(argv: list[str]) -> int | None:
    """The exit code of ``mdsearch search`` when the server that holds the index searched and
    printed it for this process (written here), else None: the question, sent or not, is left
    for the CLI (:func:`take`)."""
    global _sent
    send(argv)
    if _sent is None:
        return None
    path, request, answered = _sent
    answer = answered()  # type: ignore[operator]
    rendered = answer.get("rendered") if isinstance(answer, dict) else None
    if not isinstance(rendered, dict):
        _sent = (path, request, _Answered(answer))
        return None
    _sent = None
    return _write(str(rendered.get("out") or ""), str(rendered.get("err") or ""),
                  int(rendered.get("exit") or 0))


class _Answered:
    """An answer already read, handed to the CLI as the socket's reader would give it."""

    def __init__(self, answer: dict | None) -> None:
        self.answer = answer

    def __call__(self) -> dict | None:
        return self.answer

    def close(self) -> None:
        pass


def _write(out: str, err: str, code: int) -> int:
    """What the server printed, on this process's streams."""
    try:
        sys.stderr.write(err)
        sys.stdout.write(out)
        sys.stdout.flush()
    except BrokenPipeError:  # `| head` has what it wanted: quiet, exit 141, as the CLI does
        from mdsearch_ls.cli import _reader_gone

        return _reader_gone()
    return code


def columns(fallback: int) -> int:
    """The terminal's width as ``shutil.get_terminal_size`` reads it (``$COLUMNS``, else the
    terminal on stdout, else ``fallback``), without shutil: its import (zlib, bz2, lzma with it)
    is ~3 ms of a search that the server holding the index answers."""
    try:
        width = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        width = 0
    if width > 0:
        return width
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or fallback
    except (AttributeError, ValueError, OSError):  # no stdout, not a terminal
        return fallback


def terminal() -> dict[str, int | bool]:
    """What the printer needs of this process's terminal: its width, whether stdout is one, and
    whether colour is turned off (``NO_COLOR``, ``TERM=dumb``); one rule for this process's own
    printer (``output.Terminal.here``) and for a server printing for it."""
    out = sys.stdout
    return {"columns": columns(100), "tty": hasattr(out, "isatty") and out.isatty(),
            "no_color": bool(os.environ.get("NO_COLOR")),
            "dumb": os.environ.get("TERM") == "dumb"}


def send(argv: list[str]) -> None:
    """Send ``argv``'s question ahead when it is a plain search of an indexed folder that a
    server's socket is beside; otherwise nothing happens."""
    global _sent
    drop()
    try:
        request = _request(argv)
        if request is None:
            return
        from mdsearch_ls.engine.api import index_folder, indexed_folder, send_socket, socket_file

        root = indexed_folder(os.getcwd())
        if root is None:
            return
        index_dir = index_folder(root)
        path = socket_file(index_dir)  # (send_socket checks a fallback's folder)
        answered = send_socket(path, index_dir, request, timeout=ANSWER_S,  # type: ignore[arg-type]
                               connect_timeout=CONNECT_S, quiet=True)
    except Exception:  # a guess: whatever went wrong, the CLI asks (or searches) as before
        return
    if answered is not None:
        _sent = (path, request, answered)


def take(path: Path, request: dict, defaults: dict) -> object | None:
    """The answer function of the question sent ahead, when it went to ``path`` and is
    ``request`` (whose settings are the defaults, ``defaults``); None, and the early one
    dropped, otherwise. Taken once."""
    global _sent
    sent, _sent = _sent, None
    if sent is None:
        return None
    sent_path, sent_request, answered = sent
    same = (sent_path == os.fspath(path) and request.get("settings") == defaults
            and {k: v for k, v in sent_request.items() if k not in ("defaults", "render")}
            == {k: v for k, v in request.items() if k != "settings"})
    if not same:
        answered.close()  # type: ignore[attr-defined]
        return None
    return answered


def drop() -> None:
    """Close the question sent ahead if nothing took it (the CLI failed before asking, or
    searched another way): the server's answer to it goes nowhere."""
    global _sent
    sent, _sent = _sent, None
    if sent is not None:
        sent[2].close()  # type: ignore[attr-defined]


def _request(argv: list[str]) -> dict | None:
    """The request ``mdsearch search`` would send for ``argv`` with the default settings, or None
    when ``argv`` is anything but a search of one query with flags of :data:`_FLAGS` and
    :data:`_VALUED` (each then read here as argparse reads it, or not at all)."""
    if not argv or argv[0] != "search":
        return None
    query: str | None = None
    k, mode = 5, None
    words = iter(argv[1:])
    for word in words:
        name, eq, value = word.partition("=")
        if word in _FLAGS:
            continue
        if name in _VALUED and name.startswith("--") and eq:
            pass
        elif word in _VALUED:
            value = next(words, None)
            if value is None:
                return None
        elif word.startswith("-k") and word[2:].isdigit():
            name, value = "-k", word[2:]
        elif word.startswith("-") or query is not None:
            return None
        else:
            query = word
            continue
        choices = _VALUED[name]
        if choices is not None and value not in choices:
            return None  # argparse's error to give
        if choices is None and not value.isdigit():
            return None
        if name in ("-k", "--limit"):
            k = int(value)
        elif name == "--mode":
            mode = value
    if not query:
        return None
    from mdsearch_ls.engine.api import PROTOCOL_RESIDENT

    return {"v": PROTOCOL_RESIDENT, "defaults": True, "update": True,
            "queries": [{"query": query, "k": k, "mode": mode, "filters": None,
                         "min_score": None}],
            # what the server needs to print the answer as the CLI would here (cli/rendering.py)
            "render": {"argv": argv, "cwd": os.getcwd(), **terminal()}}
