"""The holder's side of the channel: each request the engine's call, each answer its result.

:func:`answer` is the :class:`~.channel.Server`'s handler in every process that holds an index.
It reads a request (:func:`messages.read_request`: a message of another version, an unknown
type or a field of the wrong type is a typed error answer, and the connection goes on), finds
the folder it names among those this process holds, and calls the same method a front end of
this process would call. Whatever the engine raises is answered as its type and sentence, so
the asker raises the same error; anything unexpected is logged here and answered as a
``HolderError``: every request gets an answer, and the holder keeps serving everyone else.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdsearch_ls.config import INDEX_FIELDS
from mdsearch_ls.engine.errors import MdsearchError, RequestError
from mdsearch_ls.engine.search.requests import RelatedRequest, SearchRequest
from mdsearch_ls.engine.service import messages as m
from mdsearch_ls.engine.service.channel import Reply

if TYPE_CHECKING:  # (folders imports this module: the type alone, for annotations)
    from mdsearch_ls.engine.service.folder import IndexedFolder
    from mdsearch_ls.engine.service.folders import Folders

log = logging.getLogger(__name__)

OPEN_WAIT_S = 60.0
"""How long a request waits for a folder this process is opening (a large index takes
seconds) before it says this process does not hold it."""


def answer(folders: Folders, message: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """The answer to one message (see the module docstring)."""
    try:
        if "bad" in message:
            raise m.MessageError(str(message["bad"]))
        request = m.read_request(message)
        return m.answer_message(_dispatch(folders, request, reply))
    except (MdsearchError, m.MessageError) as exc:
        return m.problem_message(exc)
    except Exception as exc:
        log.exception("a request through the channel failed")
        return m.problem_message(exc)


def _dispatch(folders: Folders, request: Any, reply: Reply) -> Any:
    if isinstance(request, m.Hello):
        return m.Holder(os.getpid(), folders.role, [str(f.root) for f in folders if f.held])
    if isinstance(request, m.Hold | m.Leave | m.Stop):
        if folders.background is None:
            raise m.HolderError("only the background process holds a folder on request; this "
                                f"is a {folders.role} (process {os.getpid()})")
        return folders.background(request)
    folder = _held(folders, request.root)
    if isinstance(request, m.Search):
        folder = _with_settings(folders, folder, request.given)
        folder.wait_looked()
        return [_query(folder, q) for q in request.requests]
    if isinstance(request, m.RelatedAsk):
        r = request.request
        return folder.related(RelatedRequest.build(r.path, r.line, text=r.text, k=r.k,
                                                   min_score=r.min_score))
    if isinstance(request, m.AidAsk):
        if request.name not in m.AIDS or folder.writing is None:
            raise RequestError(f"no writing aid {request.name!r}", "name")
        return getattr(folder.writing, request.name)(**request.args)
    if isinstance(request, m.StatusAsk):
        return folder.status()
    if isinstance(request, m.NotesAsk):
        if request.among is not None:
            return [rel for rel in request.among if folder.is_indexed(rel)]
        return folder.notes()
    if isinstance(request, m.IndexAsk):
        folder = _with_settings(folders, folder, request.given)
        return _index(folder, request, reply)
    raise m.MessageError(f"no handler for {type(request).__name__}")


def _held(folders: Folders, root: str) -> IndexedFolder:
    folder = folders.get(Path(root))
    if folder is not None:
        folder.wait_open(OPEN_WAIT_S)  # (a folder this process is taking, a moment away)
    if folder is None or not folder.held:
        raise m.NotHeld(f"process {os.getpid()} does not hold the index of {root} (any "
                            f"more): look again for who does")
    folder.last_asked = time.monotonic()
    return folder


def _with_settings(folders: Folders, folder: IndexedFolder, given: dict[str, Any]
                   ) -> IndexedFolder:
    """The folder, when the index settings the asker named (its own flags) are this folder's;
    the background process takes the asker's settings (it holds folders only for the CLI),
    any other holder refuses rather than answer from another index than the one asked of."""
    differ = sorted(k for k, v in given.items()
                    if k in INDEX_FIELDS and _plain(getattr(folder.settings, k, None)) != v)
    if not differ:
        return folder
    if folders.background is not None:
        folders.background(m.Hold(str(folder.root), {**_current(folder), **given}))
        return _held(folders, str(folder.root))
    raise RequestError(
        f"the index of {folder.root} is held by a {folders.role} (process {os.getpid()}) with "
        f"other settings ({', '.join(differ)}); stop it, or drop those options to search its "
        f"index", "settings")


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _current(folder: IndexedFolder) -> dict[str, Any]:
    return {k: _plain(getattr(folder.settings, k)) for k in INDEX_FIELDS
            if hasattr(folder.settings, k)}


def _query(folder: IndexedFolder, q: SearchRequest) -> m.QueryAnswer:
    """One query's answer, or the engine's refusal of it (the others still run)."""
    try:
        request = SearchRequest.build(q.query, k=q.k, mode=q.mode, filters=q.filters,
                                      min_score=q.min_score)
        return m.QueryAnswer(result=folder.search(request))
    except RequestError as exc:
        return m.QueryAnswer(problem=m.problem_of(exc))


def _index(folder: IndexedFolder, request: m.IndexAsk, reply: Reply) -> Any:
    """An index run for the asker, its progress sent as it goes; the asker gone (its terminal
    closed, Ctrl-C) stops the run after the batch in progress, as its own run would stop."""
    gone = False

    def progress(done: int, total: int, chunks: int) -> None:
        nonlocal gone
        if gone:
            return
        try:
            reply(m.progress_message(done, total, chunks))
        except OSError:
            gone = True

    future = folder.start_index(rebuild=request.rebuild, progress=progress,
                                cancel=lambda: gone)
    return future.result()


__all__ = ["answer"]
