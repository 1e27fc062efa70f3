"""A Hypothesis state machine over the engine: any history of writes and crashes leaves an index
that agrees with itself, and with a clean build of the notes whenever it was told every change.

Modelled on Chroma's own ``test_persist`` / ``test_embeddings`` state machines: rules change the
notes on disk (write, edit, rename, delete; telling the index through the targeted update, delete
and rename calls a server makes, or not), run a full reindex, reopen the workspace, or kill it
between two writes (an exception injected at one of the write points, then the workspace is
abandoned without closing, as a dying process leaves it, and opened anew). After every step:

* the manifest, its keyword rows, its vector cache and Chroma agree with each other;
* when every change was told (or a full reindex ran since), the index equals a clean build of
  the same notes: the same files, chunks, keyword rows and Chroma ids and metadata.

Fake embedder, real SQLite and Chroma on disk, a few notes per example: well under a minute.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.index.manifest import Manifest
from mdsearch_ls.engine.index.vector_store import ChromaStore
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import FakeEmbedder
from tests.index_state import assert_consistent, snapshot

PATHS = ["a.md", "b.md", "sub/c.md", "sub/deep/d.md", "e.markdown"]
HEADINGS = ["Plan", "Budget", "Notes", "Risks", "Plan"]  # a repeated heading on purpose
BODIES = [
    "Invoices are paid within thirty days.",
    "The firewall blocks every inbound port but 443.",
    "Backups run nightly and are tested monthly.",
    "Invoices are paid within thirty days.",  # the same section in two notes: one vector
    "Hiring starts after the roadmap review. " * 40,  # longer than a chunk: split with overlap
    "",
]

section = st.tuples(st.sampled_from(HEADINGS), st.sampled_from(BODIES))
front = st.sampled_from(["", "---\ntags: [finance]\n---\n", "---\naliases: [Other name]\n---\n"])
note_text = st.builds(
    lambda fm, secs: fm + "\n".join(f"## {h}\n\n{b}\n" for h, b in secs),
    front, st.lists(section, max_size=4),
)
content = st.one_of(
    note_text.map(str.encode),
    st.just(b"# x\x00binary"),  # skipped: NUL bytes
    st.just(bytes(random.Random(3).randrange(1, 256) for _ in range(300))),  # no-NUL binary
)


class Killed(BaseException):
    """What a kill -9 between two writes looks like from inside: nothing catches it."""


# Every place the engine writes, in the order a run reaches them.
WRITE_POINTS = [
    (Manifest, "put_vectors"),
    (ChromaStore, "upsert"),
    (ChromaStore, "delete"),
    (Manifest, "apply"),
    (Manifest, "touch"),
]


@contextlib.contextmanager
def kill_at(owner: type, name: str, after: int) -> Iterator[None]:
    """Raise :class:`Killed` instead of the ``after``-th call (0-based) of ``owner.name``."""
    real = getattr(owner, name)
    calls = {"n": 0}

    def wrapper(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] > after:
            raise Killed(f"killed before {owner.__name__}.{name}")
        return real(self, *args, **kwargs)

    setattr(owner, name, wrapper)
    try:
        yield
    finally:
        setattr(owner, name, real)


class EngineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.base = Path(tempfile.mkdtemp(prefix="mdsearch-state-"))
        self.root = self.base / "vault"
        self.root.mkdir()
        self.clock = 1.7e9
        self.dirty = False  # the notes changed without the index being told
        self.abandoned: list[Workspace] = []
        self.ws = self._open()
        self.clean = Workspace.open(self.root, Settings(), embedder=FakeEmbedder(),
                                    index_dir=self.base / "clean")

    def _open(self) -> Workspace:
        return Workspace.open(self.root, Settings(), embedder=FakeEmbedder(),
                              index_dir=self.base / "index")

    def _write(self, path: str, raw: bytes) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(raw)
        self.clock += 10  # a distinct mtime for every write, as a scan needs
        os.utime(target, (self.clock, self.clock))

    def _existing(self) -> list[str]:
        return [p for p in PATHS if (self.root / p).is_file()]

    # ---- rules ------------------------------------------------------------------------------

    @rule(path=st.sampled_from(PATHS), raw=content, tell=st.booleans())
    def write(self, path: str, raw: bytes, tell: bool) -> None:
        self._write(path, raw)
        if tell:
            self.ws.update([path])
        else:
            self.dirty = True

    @precondition(lambda self: bool(self._existing()))
    @rule(data=st.data(), tell=st.booleans())
    def delete(self, data: st.DataObject, tell: bool) -> None:
        path = data.draw(st.sampled_from(self._existing()))
        (self.root / path).unlink()
        if tell:
            self.ws.delete([path])
        else:
            self.dirty = True

    @precondition(lambda self: bool(self._existing()))
    @rule(data=st.data(), dst=st.sampled_from(PATHS), tell=st.booleans())
    def rename(self, data: st.DataObject, dst: str, tell: bool) -> None:
        src = data.draw(st.sampled_from(self._existing()))
        if src == dst:
            return
        (self.root / dst).parent.mkdir(parents=True, exist_ok=True)
        os.replace(self.root / src, self.root / dst)  # over an existing note too
        if tell:
            self.ws.rename([(src, dst)])
        else:
            self.dirty = True

    @rule()
    def reindex(self) -> None:
        report = self.ws.index()
        assert not report.cancelled
        self.dirty = False

    @rule()
    def reopen(self) -> None:
        self.ws.close()
        self.ws = self._open()

    @rule(point=st.sampled_from(WRITE_POINTS), after=st.integers(0, 2),
          path=st.sampled_from(PATHS), raw=note_text.map(str.encode), full=st.booleans())
    def kill_between_writes(self, point: tuple[type, str], after: int, path: str, raw: bytes,
                            full: bool) -> None:
        self._write(path, raw)
        with kill_at(*point, after), contextlib.suppress(Killed):
            if full:
                self.ws.index()
            else:
                self.ws.update([path])
        # The process is gone: nothing closed cleanly, the lock released by the OS.
        self.ws.abandon()
        self.abandoned.append(self.ws)
        self.ws = self._open()
        self.dirty = True  # what the dead run did not finish, the next reindex does

    # ---- invariants -------------------------------------------------------------------------

    @invariant()
    def stores_agree(self) -> None:
        assert_consistent(self.ws)

    @invariant()
    def equals_a_clean_build_when_told_everything(self) -> None:
        if self.dirty:
            return
        self.clean.index(rebuild=True)
        got, want = snapshot(self.ws), snapshot(self.clean)
        assert got == want, got.diff(want)

    def teardown(self) -> None:
        try:
            # Whatever happened, one full reindex converges on the clean build.
            self.ws.index()
            self.clean.index(rebuild=True)
            got, want = snapshot(self.ws), snapshot(self.clean)
            assert got == want, got.diff(want)
        finally:
            for ws in (self.ws, self.clean, *self.abandoned):
                with contextlib.suppress(Exception):
                    if ws.store is not None:
                        ws.store.close()
                    ws.close()
            shutil.rmtree(self.base, ignore_errors=True)


EngineMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("MDSEARCH_STATE_EXAMPLES", "25")),
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.mark.slow  # about 10 s of CPU, 25 histories of 12 steps
class TestEngineState(EngineMachine.TestCase):  # type: ignore[misc, valid-type]
    pass
