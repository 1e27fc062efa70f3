"""The engine's seam: what front ends may import, the layers of the engine, and what a
workspace says about its own index.

Front ends (the CLI, ``lsp/``, the MCP server) talk to the engine through
``mdsearch_ls.engine.api`` only.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.api import RelatedRequest, RequestError, SearchRequest
from mdsearch_ls.engine.workspace import Workspace

PACKAGE = Path(__file__).resolve().parents[2] / "mdsearch_ls"
FRONT_ENDS = [*sorted((PACKAGE / "cli").rglob("*.py")), PACKAGE / "mcp.py",
              *sorted((PACKAGE / "mcp").rglob("*.py")), *sorted((PACKAGE / "lsp").rglob("*.py"))]
ALLOWED = {"mdsearch_ls.engine.api", "mdsearch_ls.engine.errors"}
INTERNALS = ("indexer", "manifest", "store", "searcher", "_lock", "_writer", "_filter")


def _module(path: Path) -> str:
    """A readable test id: several front-end packages have an __init__.py."""
    return path.relative_to(PACKAGE).as_posix()


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text("utf-8"))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
            names.extend(f"{node.module}.{a.name}" for a in node.names
                         if node.module == "mdsearch_ls.engine")
        elif isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
    return names


@pytest.mark.parametrize("path", [p for p in FRONT_ENDS if p.exists()], ids=_module)
def test_front_ends_import_only_the_seam(path: Path) -> None:
    engine = [m for m in _imports(path) if m.startswith("mdsearch_ls.engine")]
    assert set(engine) <= ALLOWED, f"{path.name} reaches past the seam: {sorted(set(engine))}"


@pytest.mark.parametrize("path", [p for p in FRONT_ENDS if p.exists()], ids=_module)
def test_front_ends_touch_no_engine_internals(path: Path) -> None:
    tree = ast.parse(path.read_text("utf-8"))
    reached = sorted({n.attr for n in ast.walk(tree)
                      if isinstance(n, ast.Attribute) and n.attr in INTERNALS
                      and not (isinstance(n.value, ast.Name) and n.value.id == "self")})
    assert not reached, f"{path.name} uses engine internals: {reached}"


def _vault(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("# Apples\n\nApples grow in orchards.\n", "utf-8")
    (root / "b.md").write_text("# Boats\n\nBoats sail on the sea.\n", "utf-8")
    return root


def test_index_state_tells_building_from_interrupted(tmp_path, fake_embedder) -> None:
    root = _vault(tmp_path)
    index = tmp_path / "index"
    with Workspace.open(root, Settings(), embedder=fake_embedder,
                        index_dir=index) as ws:
        assert ws.index_state().state == "empty"
        seen: list[str] = []
        ws.index(progress=lambda done, total, chunks: seen.append(ws.index_state().state))
        assert seen and set(seen) == {"building"}
        assert ws.index_state().state == "ready"
        ws.index(cancel=lambda: True)  # stops before the end
        assert ws.index_state().state in ("ready", "interrupted")
    # A run that never finished, whose holder is gone: the next holder says so.
    with Workspace.open(root, Settings(), embedder=fake_embedder, index_dir=index) as ws:
        ws._record_state("building", 1, 2)
    with Workspace.open(root, Settings(), embedder=fake_embedder, index_dir=index) as again:
        state = again.index_state()
        assert (state.state, state.files_done, state.files_total) == ("interrupted", 1, 2)


def test_a_run_over_a_whole_index_leaves_it_ready(tmp_path, fake_embedder) -> None:
    """A holder's look over an index that is whole (a server's first look, `mdsearch index`):
    a client asking meanwhile must not hear "still being built (0 of 0 notes)". A rebuild is a
    half-built index until it ends, and says so."""
    root = _vault(tmp_path)
    index = tmp_path / "index"
    with Workspace.open(root, Settings(), embedder=fake_embedder,
                        index_dir=index) as ws:
        ws.index()
        (root / "a.md").write_text("# Apples\n\nApples grow on trees.\n", "utf-8")
        (root / "c.md").write_text("# Carts\n\nCarts roll.\n", "utf-8")
        seen: list[tuple[str, int, int]] = []

        def look(*_progress: int) -> None:
            state = ws.index_state()
            seen.append((state.state, state.files_done, state.files_total))

        report = ws.index(progress=look)
        assert report.files_indexed == 2
        assert seen and set(seen) == {("ready", 2, 2)}  # as the last run left it
        assert ws.index_state().files_total == 3
        seen.clear()
        ws.index(progress=look, rebuild=True)
        assert seen and {s for s, _, _ in seen} == {"building"}
        ws.index(cancel=lambda: True)  # over a whole index: still whole
        assert ws.index_state().state == "ready"


def test_search_settings_apply_at_once_index_settings_do_not(tmp_path, fake_embedder) -> None:
    root = _vault(tmp_path)
    with Workspace.open(root, Settings(), embedder=fake_embedder,
                        index_dir=tmp_path / "index") as ws:
        ws.index()
        assert ws.apply_settings(Settings(max_results=1, per_file=1))
        assert len(ws.hits("sea orchards")) == 1
        assert not ws.apply_settings(Settings(chunk_size=500))
        assert ws.settings.chunk_size == 1000


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"query": 5}, "query"),
        ({"query": "x", "k": 0}, "limit"),
        ({"query": "x", "k": "3"}, "limit"),
        ({"query": "x", "mode": "fuzzy"}, "mode"),
        ({"query": "x", "filters": {"tag": 5}}, "filters.tag"),
        ({"query": "x", "filters": ["tag"]}, "filters"),
        ({"query": "x", "filters": {"colour": "red"}}, "filters"),
        ({"query": "x", "min_score": 3}, "min_score"),
        ({"query": "x modified:yesterday"}, "query"),
        ({"query": "x" * 10_001}, "query"),
    ],
)
def test_search_requests_are_validated_naming_the_field(kwargs, field) -> None:
    query = kwargs.pop("query")
    with pytest.raises(RequestError) as info:
        SearchRequest.build(query, **kwargs)
    assert info.value.field == field


def test_related_requests_are_validated() -> None:
    with pytest.raises(RequestError, match="line"):
        RelatedRequest.build("a.md", -1)
    with pytest.raises(RequestError, match="path"):
        RelatedRequest.build("", 0)
    assert RelatedRequest.build("a.md", 3, k=2).k == 2


def test_related_refuses_a_path_outside_the_root(tmp_path, fake_embedder) -> None:
    root = _vault(tmp_path)
    (tmp_path / "outside.md").write_text("# Out\n\nApples.\n", "utf-8")
    with Workspace.open(root, Settings(), embedder=fake_embedder,
                        index_dir=tmp_path / "index") as ws:
        ws.index()
        with pytest.raises(RequestError, match="not a note inside"):
            ws.related(RelatedRequest.build(str(tmp_path / "outside.md"), 0))
        assert ws.related(RelatedRequest.build(str(root / "a.md"), 0)).section is not None


# The engine's layers, lowest first: a module may import its own layer and the ones below it,
# never one above (annotations under TYPE_CHECKING excepted), so the packages stay a stack.
LAYERS = ["errors", "heap", "states", "locations", "notes", "embedding", "index", "search",
          "writing", "workspace", "service", "api"]
ENGINE = PACKAGE / "engine"


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[:2] != ["mdsearch_ls", "engine"] or len(parts) < 3:
        return None
    return LAYERS.index(parts[2])


def _run_time_imports(path: Path) -> list[str]:
    """Modules a file imports when it runs: every import but those under ``if TYPE_CHECKING``."""
    tree = ast.parse(path.read_text("utf-8"))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    names: list[str] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
            names.extend(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
    return names


def _engine_module(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts).removesuffix(".__init__")


@pytest.mark.parametrize("path", sorted(set(ENGINE.rglob("*.py")) - {ENGINE / "__init__.py"}),
                         ids=_module)
def test_no_engine_layer_imports_a_higher_one(path: Path) -> None:
    own = _layer(_engine_module(path))
    assert own is not None, f"{path.name}: an engine module outside the known layers {LAYERS}"
    above = sorted({m for m in _run_time_imports(path)
                    if (layer := _layer(m)) is not None and layer > own})
    assert not above, f"{_module(path)} imports a higher layer: {above}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "lsp" / "features").glob("*.py")), ids=_module)
def test_no_feature_imports_the_server_module_at_run_time(path: Path) -> None:
    """The composition root (lsp/app.py) imports the features; a feature importing the server
    module back would close a circle."""
    reached = {m for m in _run_time_imports(path)
               if m.startswith(("mdsearch_ls.lsp.server", "mdsearch_ls.lsp.app"))}
    assert not reached, f"{path.name} imports {sorted(reached)} at run time"
