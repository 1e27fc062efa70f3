"""The states every front end shows, declared once.

A status bar in VS Code, the Obsidian plugin's status item, the MCP server's ``index_status``
and the CLI's ``status`` all describe the same things: where a folder is in its life, whether the
model is loaded, how far its index has got. The words for those used to be written in each front
end and had drifted (a folder that was still starting showed as ready in VS Code, because the
extension's copy of the list did not have "starting"). Now they are these enums, and the
TypeScript copies are generated from them (``scripts/sync_protocol.py``, with a drift test).

They are ``StrEnum``: a member *is* its string, so JSON, comparisons with plain strings and old
clients all keep working.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class FolderState(StrEnum):
    """Where a kept-indexed folder is in its life (the status bar's word for it)."""

    STARTING = "starting"
    """Known, but its index is not opened yet (the first moment after a folder is added)."""
    LOADING_MODEL = "loading-model"
    """Waiting for the embedding model before it can index."""
    INDEXING = "indexing"
    """Its writer is bringing the index up to date (or another process is building it)."""
    READY = "ready"
    """Up to date as far as this process knows; searches use it."""
    ERROR = "error"
    """The index could not be opened or written; ``last_error`` says why."""


class ModelState(StrEnum):
    """The shared embedding model of a long-running process."""

    NOT_LOADED = "not-loaded"
    LOADING = "loading"
    LOADED = "loaded"
    ERROR = "error"


class IndexPhase(StrEnum):
    """What the index on disk holds, as a search answer reports it beside its hits."""

    EMPTY = "empty"
    """Nothing indexed yet."""
    BUILDING = "building"
    """A first index (or a rebuild) is running: hits come from what is there so far."""
    READY = "ready"
    INTERRUPTED = "interrupted"
    """A first index stopped part way (the process was killed); the next run resumes it."""
    ERROR = "error"


def overall_state(folder_states: list[str], model: str) -> FolderState:
    """The one word a status bar shows for a whole process: the model first, then the least
    finished folder (an error shows alone only when every folder failed, so one broken folder
    does not hide that the others are searchable)."""
    states = set(folder_states)
    if states == {FolderState.ERROR}:
        return FolderState.ERROR
    if model == ModelState.LOADING:
        return FolderState.LOADING_MODEL
    for least_finished in (FolderState.STARTING, FolderState.LOADING_MODEL, FolderState.INDEXING):
        if least_finished in states:
            return least_finished
    if FolderState.ERROR in states:
        return FolderState.ERROR
    return FolderState.READY


def overall_phase(phases: list[str]) -> IndexPhase:
    """One phase for several folders' indexes, the least finished first."""
    if not phases:
        return IndexPhase.EMPTY
    if IndexPhase.BUILDING in phases:
        return IndexPhase.BUILDING
    if all(p == IndexPhase.EMPTY for p in phases):
        return IndexPhase.EMPTY
    if IndexPhase.INTERRUPTED in phases:
        return IndexPhase.INTERRUPTED
    if all(p == IndexPhase.ERROR for p in phases):
        return IndexPhase.ERROR
    return IndexPhase.READY


@dataclass
class Progress:
    """When a folder's index run started and how far it got, for an estimate of the rest."""

    started: float = 0.0
    first_t: float = 0.0
    first_done: int = 0
    t: float = 0.0
    done: int = 0
    total: int = 0

    def record(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.first_t and done > 0:
            self.first_t, self.first_done = now, done
        self.t, self.done, self.total = now, done, total

    def eta(self) -> float | None:
        """Seconds left at the rate so far, None until there is a rate (the first batch of a
        run includes the model's warm-up, so the rate is taken from the first progress on)."""
        if not self.first_t or self.t <= self.first_t or self.done <= self.first_done:
            return None
        rate = (self.done - self.first_done) / (self.t - self.first_t)
        return max(0.0, (self.total - self.done) / rate)


#: The status record of one folder, field by field, with its TypeScript type: the language
#: server's ``mdsearch/status`` notification carries a list of these, and the generated
#: TypeScript interface is made from this table, so the two cannot drift.
FOLDER_STATUS_FIELDS: dict[str, tuple[str, str]] = {
    "root": ("string", "the folder's absolute path (on the server's machine)"),
    "name": ("string", "its display name"),
    "files": ("number", "notes in the index"),
    "chunks": ("number", "sections in the index"),
    "model": ("string", "the embedding model's name"),
    "index_dir": ("string | null", "where the index lives (outside the notes)"),
    "vectors": ("string | null", "where its vectors live: the index folder's Chroma, or a "
                "Chroma server's URL and collection"),
    "queue": ("number", "changes waiting for the writer"),
    "state": ("FolderState", "where the folder is in its life"),
    "last_error": ("string | null", "why it failed, when it did"),
    "last_update": ("string | null", "when the index last changed (ISO 8601)"),
    "read_only": ("boolean", "another process holds this index; this one asks it"),
    "held_by": ("{ pid: number; role: string } | null",
                "the process that holds the index (pid, and server, background or command)"),
    "index": ("IndexProgress", "the index's phase and how far a build got"),
}

#: ``IndexState.to_json()``, as the status record's ``index`` field carries it.
INDEX_PROGRESS_FIELDS: dict[str, tuple[str, str]] = {
    "state": ("IndexPhase", "what the index holds"),
    "files_done": ("number", "notes done by the running build"),
    "files_total": ("number", "notes the running build has to do"),
}


def enum_values(kind: type[StrEnum]) -> list[str]:
    """The wire values of a state enum, in declaration order."""
    return [m.value for m in kind]


STATE_ENUMS: dict[str, Any] = {
    "FolderState": FolderState,
    "ModelState": ModelState,
    "IndexPhase": IndexPhase,
}
