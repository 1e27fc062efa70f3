"""The engine's exceptions: precise types whose message is written for a person.

The core raises these; each front end turns them into its own form (a CLI message and exit code,
an LSP error response or ``window/showMessage``, an MCP tool error) by their type alone, so the
same failure reads the same everywhere and no front end parses a message.
"""

from __future__ import annotations


class MdsearchError(Exception):
    """Base of every error the engine means a person to read."""


class RequestError(MdsearchError, ValueError):
    """A request that cannot be run as given (bad limit, mode, filter, query); ``field`` names the
    part of the request at fault so a protocol can point at it."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class IndexLockedError(MdsearchError):
    """Another process writes this index. Two writers would hang or corrupt Chroma."""

    def __init__(self, message: str, holder: str | None = None) -> None:
        super().__init__(message)
        self.holder = holder

    @property
    def holder_text(self) -> str:
        """`` (process 123)`` when the holder's pid is known, else empty."""
        return f" (process {self.holder})" if self.holder else ""


class BroadRootError(MdsearchError):
    """A server was pointed at /, the home folder or a folder of more notes than ``max_files``
    and no setting allows it: refused before any walk or write."""


class IndexReadOnlyError(MdsearchError):
    """A write was asked of a workspace opened read-only (another process is its writer)."""


class NotIndexedError(MdsearchError):
    """A read was asked of a folder that has no index yet; reads never create one."""


class IndexOpenError(MdsearchError):
    """The index exists but cannot be used (damaged, another version); it can be rebuilt."""


class ForeignIndexError(IndexOpenError):
    """The index folder belongs to another user: its manifest holds their notes' text, so it is
    neither read nor written unless the person says so (``MDSEARCH_ALLOW_OTHER_OWNER=1``)."""


class VectorServerError(MdsearchError):
    """The Chroma server named by ``chroma_url`` cannot be reached, does not answer in time, or
    answers something that is not Chroma. Not damage: the index is not set aside, nothing is
    written, and the message names the URL and what to check."""


__all__ = [
    "BroadRootError",
    "ForeignIndexError",
    "IndexLockedError",
    "IndexOpenError",
    "IndexReadOnlyError",
    "MdsearchError",
    "NotIndexedError",
    "RequestError",
    "VectorServerError",
]
