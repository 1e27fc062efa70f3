"""A timer that fires once a folder's writer has been idle for a while.

A long-running front end holds an index open for hours, but writes to it in bursts (a save, a
watcher event). Some of what a write needs is costly to keep between bursts (Chroma's graph, all
of it in memory), so the writer gives it back when nothing has been written for a while.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class IdleTimer:
    """Calls ``fire`` (on a timer thread) once ``delay`` seconds pass without a :meth:`touch`."""

    def __init__(self, delay: float, fire: Callable[[], None]) -> None:
        self.delay = delay
        self._fire = fire
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def touch(self) -> None:
        """Something happened: start the wait again."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.delay, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
