"""What one index or update run did, and the callbacks a run reports to: the types every
front end reads, apart from the indexer so that a process asking a holder for a run imports
none of the indexer's machinery."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

ProgressFn = Callable[[int, int, int], None]
"""``(files done, files total, chunks done)``, called after every embedded batch and every write.
Chunks done counts the chunks of this run whose vector is ready (embedded now or found in the
cache), so it moves with each batch even inside one long note; at the end of a run it equals
``IndexReport.chunks_written``."""
CancelFn = Callable[[], bool]


@dataclass
class IndexReport:
    """What one index or update run did; the CLI prints it and the server logs it."""

    files_total: int = 0
    files_indexed: int = 0
    files_unchanged: int = 0
    files_deleted: int = 0
    files_skipped: int = 0
    chunks_total: int = 0
    chunks_written: int = 0
    chunks_embedded: int = 0
    vector_cache_hits: int = 0
    repaired: int = 0
    seconds: float = 0.0
    cancelled: bool = False
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [
            f"{self.files_total} files",
            f"{self.chunks_total} chunks",
            f"{self.files_indexed} indexed",
            f"{self.files_deleted} removed",
            f"{self.chunks_embedded} embedded",
            f"{self.vector_cache_hits} reused",
        ]
        if self.files_skipped:
            parts.append(f"{self.files_skipped} skipped")
        if self.repaired:
            parts.append(f"{self.repaired} repaired")
        text = ", ".join(parts) + f" in {self.seconds:.2f}s"
        return text + (" (cancelled)" if self.cancelled else "")


__all__ = ["CancelFn", "IndexReport", "ProgressFn"]
