"""A folder that another process holds, asked through the channel.

:class:`RemoteIndex` answers what an index held here answers (search, related sections, the
writing aids, status, the notes it holds, an index run), with the same types, by asking the
holder. A front end never sees it: :class:`~mdsearch_ls.engine.service.folder.IndexedFolder`
uses it when another process holds its index. Errors the holder met are raised here as the
engine's own types (:func:`messages.error_of`); a holder that is gone or silent is a
:class:`~mdsearch_ls.engine.service.channel.ChannelError`, on which the folder looks again for
who holds the index (maybe no one now: then it holds it itself).
"""

from __future__ import annotations

import inspect
import logging
import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mdsearch_ls.engine import errors
from mdsearch_ls.engine.index.report import IndexReport
from mdsearch_ls.engine.search.hits import Related, SearchResult
from mdsearch_ls.engine.search.requests import RelatedRequest, SearchRequest
from mdsearch_ls.engine.service import messages as m
from mdsearch_ls.engine.service.channel import ANSWER_S, ChannelError, Client, Endpoint

log = logging.getLogger(__name__)

HOLDER_FILE = "holder.json"
"""The holder's :class:`Endpoint` record, in the index folder it holds."""


def holder_record(index_dir: Path) -> Path:
    return Path(index_dir) / HOLDER_FILE


class RemoteIndex:
    """The index of ``root`` as its holder at ``endpoint`` answers for it. Any thread: each
    request takes an idle connection (or makes one) and gives it back."""

    def __init__(self, root: Path, endpoint: Endpoint) -> None:
        self.root = Path(root)
        self.endpoint = endpoint
        self._idle: list[Client] = []
        self._lock = threading.Lock()
        self._closed = False

    @property
    def pid(self) -> int:
        return self.endpoint.pid

    def ask(self, request: Any, answer_type: Any, *, timeout: float = ANSWER_S,
            on_progress: Callable[[dict[str, Any]], None] | None = None) -> Any:
        """The holder's answer to ``request``, as ``answer_type``."""
        with self._lock:
            client = self._idle.pop() if self._idle else None
        if client is None:
            client = Client(self.endpoint)
        try:
            message = client.ask(m.request_message(request), timeout=timeout,
                                 on_progress=on_progress)
        except ChannelError:
            client.close()
            raise
        with self._lock:
            if self._closed:
                client.close()
            else:
                self._idle.append(client)
        try:
            return m.read_answer(message, answer_type)
        except m.NotHeld as exc:  # as good as gone, for this folder
            raise ChannelError(str(exc)) from None

    # ---- what an index answers ----------------------------------------------------------------

    def hello(self) -> m.Holder:
        return self.ask(m.Hello(), m.Holder, timeout=10.0)

    def search_all(self, requests: list[SearchRequest], given: dict[str, Any] | None = None
                   ) -> list[m.QueryAnswer]:
        return self.ask(m.Search(str(self.root), requests, dict(given or {})),
                        list[m.QueryAnswer])

    def search(self, request: SearchRequest, given: dict[str, Any] | None = None
               ) -> SearchResult:
        (answer,) = self.search_all([request], given)
        if answer.problem is not None:
            raise m.error_of(answer.problem)
        return answer.result

    def related(self, request: RelatedRequest) -> Related:
        return self.ask(m.RelatedAsk(str(self.root), request), Related)

    def status(self) -> dict[str, Any]:
        return self.ask(m.StatusAsk(str(self.root)), dict[str, Any])

    def notes(self, among: list[str] | None = None) -> list[str]:
        return self.ask(m.NotesAsk(str(self.root), among), list[str])

    def index(self, *, rebuild: bool = False, given: dict[str, Any] | None = None,
              progress: Callable[[int, int, int], None] | None = None) -> IndexReport:
        def relay(message: dict[str, Any]) -> None:
            if progress is not None:
                progress(int(message["done"]), int(message["total"]), int(message["chunks"]))

        return self.ask(m.IndexAsk(str(self.root), rebuild, dict(given or {})), IndexReport,
                        on_progress=relay)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for client in idle:
            client.close()


@dataclass
class Found:
    """A process that answers for an index: its index, asked remotely, and what it is."""

    index: RemoteIndex
    role: str

    def leave(self) -> None:
        """Ask a background process to let the folder go; answered once its index is closed."""
        self.index.ask(m.Leave(str(self.index.root)), bool, timeout=LEAVE_WAIT_S)


LEAVE_WAIT_S = 60.0
"""How long a background process may take to close an index it is asked to give up (a batch of
its writer in progress)."""


def find_holder(root: Path, index_dir: Path) -> Found | None:
    """The process that holds the index in ``index_dir`` and answers for ``root``, or None
    (no record, a record of a process that is gone, or one that holds the folder no more)."""
    endpoint = Endpoint.load(holder_record(index_dir))
    if endpoint is None:
        return None
    index = RemoteIndex(Path(root).resolve(), endpoint)
    try:
        hello = index.hello()
    except (ChannelError, errors.MdsearchError, m.MessageError) as exc:
        log.debug("no holder answers at %s: %s", endpoint.address, exc)
        index.close()
        return None
    if str(index.root) not in hello.folders:
        index.close()
        return None
    return Found(index, hello.role)


class RemoteAids:
    """The writing aids of a folder another process holds: each of :data:`messages.AIDS`,
    called with the arguments ``WritingAids``' own method takes and answered with its return
    type (read from that method's signature, so the two cannot drift)."""

    def __init__(self, index: RemoteIndex) -> None:
        self._index = index

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in m.AIDS:
            raise AttributeError(name)
        # here: the aids' module brings numpy and the link machinery (~60 ms, 15 MB), which a
        # process that only searches through a holder (a CLI search) never needs
        from mdsearch_ls.engine.writing.aids import WritingAids

        method = getattr(WritingAids, name)
        answer_type = typing.get_type_hints(method)["return"]
        names = list(inspect.signature(method).parameters)[1:]

        def call(*args: Any, **kwargs: Any) -> Any:
            kwargs.update(zip(names, args, strict=False))
            return self._index.ask(m.AidAsk(str(self._index.root), name, kwargs), answer_type)

        return call


__all__ = ["HOLDER_FILE", "Found", "RemoteAids", "RemoteIndex", "find_holder", "holder_record"]
