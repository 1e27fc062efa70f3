"""Feedback while a command works: the progress line on stderr, the model wrapped to report
while it loads and embeds, and SIGINT/SIGTERM turned into a clean stop after the current batch."""

from __future__ import annotations

import shutil
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, TextIO

from mdsearch_ls.cli.common import EXIT_SIGINT, EXIT_SIGTERM, log


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
        return bool(self._inner.loaded)

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
