"""Work-done progress that a worker thread can report to, safely and without flooding.

The client may refuse (or not support) server-initiated progress; then reports are dropped and
indexing goes on: progress is a courtesy, never a precondition.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from mdsearch_ls.lsp.server import MdSearchServer

log = logging.getLogger(__name__)


class IndexProgress:
    """``$/progress`` begin/report/end for one indexing job; cancellable from the client."""

    def __init__(self, server: MdSearchServer, title: str = "Indexing notes") -> None:
        self.server = server
        self.title = title
        self.token = f"mdsearch-{uuid.uuid4().hex[:12]}"
        self.enabled = False
        self._last = 0.0
        self._ended = False
        self._end_message = ""

    async def begin(self, message: str) -> None:
        if not self.server.progress_support:
            return
        try:
            await self.server.work_done_progress.create_async(self.token)
        except Exception as exc:  # refused, or the client does not do progress
            log.debug("client refused progress token: %s", exc)
            return
        self.enabled = True
        self.server.work_done_progress.begin(
            self.token,
            types.WorkDoneProgressBegin(
                title=self.title, message=message, percentage=0, cancellable=True
            ),
        )
        if self._ended:  # it finished while the token was being created
            self.server.work_done_progress.end(
                self.token, types.WorkDoneProgressEnd(message=self._end_message))
            self.server.work_done_progress.tokens.pop(self.token, None)

    def cancelled(self) -> bool:
        """True once the user pressed cancel on the progress notification."""
        fut = self.server.work_done_progress.tokens.get(self.token)
        return bool(fut is not None and fut.cancelled())

    def report(self, done: int, total: int, chunks: int) -> None:
        """Called from the worker thread; at most ten messages a second reach the client."""
        now = time.monotonic()
        if now - self._last < 0.1 and done < total:
            return
        self._last = now
        pct = 100 if total == 0 else min(100, int(done * 100 / total))
        message = f"{done}/{total} files"
        self.server.status_changed(percentage=pct, message=message)
        if not self.enabled:
            return
        value = types.WorkDoneProgressReport(message=message, percentage=pct, cancellable=True)
        self.server.call_threadsafe(self.server.work_done_progress.report, self.token, value)

    def end(self, message: str) -> None:
        """Finish (any thread). Before :meth:`begin` has its token, the end is kept and sent
        right after the begin, so the client's progress never hangs open."""
        if self._ended:
            return
        self._ended = True
        self._end_message = message
        if self.enabled:
            self.server.call_threadsafe(
                self.server.work_done_progress.end,
                self.token,
                types.WorkDoneProgressEnd(message=message),
            )
            self.server.work_done_progress.tokens.pop(self.token, None)
