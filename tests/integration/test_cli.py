"""The ``mdsearch`` command as a user runs it: a real process, the real model, a real index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.workspace import Workspace

pytestmark = pytest.mark.slow

HIT_FIELDS = {"path", "title", "breadcrumb", "start_line", "end_line", "score", "snippet"}


def run(*args: str, cache: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "mdsearch_ls", *args],
        capture_output=True, text=True, timeout=timeout, env=env,
    )


@pytest.fixture(scope="module")
def cli_vault(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from tests.conftest import copy_vault

    base = tmp_path_factory.mktemp("cli")
    vault = copy_vault(base / "vault")
    return vault, base / "index"


def test_search_json_shape_and_ranking(cli_vault: tuple[Path, Path], tmp_path: Path) -> None:
    vault, index = cli_vault
    res = run("search", "crisis escalation threshold", "--root", str(vault), "--index-dir",
              str(index), "--json", "-k", "3", cache=tmp_path)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["query"] == "crisis escalation threshold"
    assert 1 <= len(out["results"]) <= 3
    for hit in out["results"]:
        assert set(hit) == HIT_FIELDS
        assert 0 <= hit["start_line"] <= hit["end_line"]
    assert out["results"][0]["path"] == "operations/Crisis management and escalation.md"
    # The index is a cache outside the notes: nothing was written into the vault.
    assert not any(p.name.endswith((".sqlite3", ".lock")) for p in vault.rglob("*"))


def test_search_text_names_path_line_and_similarity(
    cli_vault: tuple[Path, Path], tmp_path: Path
) -> None:
    vault, index = cli_vault
    as_json = run("search", "crisis escalation threshold", "--root", str(vault), "--index-dir",
                  str(index), "--json", "-k", "2", cache=tmp_path)
    text = run("search", "crisis escalation threshold", "--root", str(vault), "--index-dir",
               str(index), "-k", "2", cache=tmp_path)
    assert text.returncode == 0, text.stderr
    best = json.loads(as_json.stdout)["results"][0]
    first = text.stdout.splitlines()[0]
    start, end = best["start_line"] + 1, best["end_line"] + 1
    assert first == (f" 1. {best['path']}:{start}  "
                     f"(lines {start}-{end}, similarity {best['score']:.2f})")
    assert text.stdout.splitlines()[1].strip() == best["breadcrumb"]


def test_queries_file_loads_the_model_once(cli_vault: tuple[Path, Path], tmp_path: Path) -> None:
    vault, index = cli_vault
    queries = tmp_path / "q.txt"
    lines = ["revenue tracking", json.dumps({"query": "security protocols", "id": 7}),
             "", "token efficiency"]
    queries.write_text("\n".join(lines) + "\n", encoding="utf-8")
    t0 = time.perf_counter()
    res = run("search", "--queries", str(queries), "--root", str(vault), "--index-dir",
              str(index), "--json", cache=tmp_path)
    elapsed = time.perf_counter() - t0
    assert res.returncode == 0, res.stderr
    objs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [o["query"] for o in objs] == ["revenue tracking", "security protocols",
                                         "token efficiency"]
    assert objs[0]["results"][0]["path"] == "finance/Revenue tracking.md"
    # Three model loads would take well over a minute here; one load plus three queries less.
    assert elapsed < 90


def test_status_json(cli_vault: tuple[Path, Path], tmp_path: Path) -> None:
    vault, index = cli_vault
    res = run("status", "--root", str(vault), "--index-dir", str(index), "--json",
              cache=tmp_path)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["files"] == 20 and info["chunks"] > 100
    assert info["model"] == "all-MiniLM-L6-v2"
    assert Path(info["index_dir"]) == index.resolve()


def test_bad_filter_is_a_usage_error(cli_vault: tuple[Path, Path], tmp_path: Path) -> None:
    vault, index = cli_vault
    # A word that is not a filter's name is text (issue 11); a known filter with a value it
    # cannot use is the error.
    res = run("search", "invoices modified:last week", "--root", str(vault), "--index-dir",
              str(index), "--mode", "keyword", "--no-update", cache=tmp_path)
    assert res.returncode == 2
    assert "modified:last" in res.stderr and ">2025-01-01" in res.stderr


def test_filter_flags_match_inline_filters(cli_vault: tuple[Path, Path], tmp_path: Path) -> None:
    vault, index = cli_vault
    common = ("--root", str(vault), "--index-dir", str(index), "--mode", "keyword",
              "--no-update", "--json", "-k", "10")
    flags = run("search", "policy", "--path", "finance/", *common, cache=tmp_path)
    inline = run("search", "policy path:finance/", *common, cache=tmp_path)
    assert flags.returncode == 0 and inline.returncode == 0, flags.stderr + inline.stderr
    got = [h["path"] for h in json.loads(flags.stdout)["results"]]
    assert got and all(p.startswith("finance/") for p in got)
    assert got == [h["path"] for h in json.loads(inline.stdout)["results"]]
    bad = run("search", "policy", "--modified", "last week", *common, cache=tmp_path)
    assert bad.returncode == 2 and "expected a date" in bad.stderr


def test_missing_root_exits_2(tmp_path: Path) -> None:
    res = run("search", "anything", "--root", str(tmp_path / "nope"), cache=tmp_path)
    assert res.returncode == 2
    assert "not found" in res.stderr


def test_locked_index_exits_3_fast(tmp_path: Path, fake_embedder: object) -> None:
    from tests.conftest import copy_vault

    vault = copy_vault(tmp_path / "vault")
    index = tmp_path / "index"
    holder = Workspace(vault, Settings(), fake_embedder, index_dir=index)  # type: ignore[arg-type]
    try:
        t0 = time.perf_counter()
        res = run("index", str(vault), "--index-dir", str(index), cache=tmp_path)
        assert res.returncode == 3, res.stderr
        assert "in use" in res.stderr and str(os.getpid()) in res.stderr
        assert time.perf_counter() - t0 < 30  # fails fast: no model load, no hang
    finally:
        holder.close()


def test_search_reads_an_index_another_process_writes(
    tmp_path: Path, real_embedder: object
) -> None:
    """An editor's server holds the index: search, related and status still answer, read-only
    (the note on stderr says so), and nothing is written."""
    from tests.conftest import copy_vault

    vault = copy_vault(tmp_path / "vault")
    index = tmp_path / "index"
    holder = Workspace(vault, Settings(), real_embedder, index_dir=index)  # type: ignore[arg-type]
    try:
        holder.index()
        generation = holder.manifest.generation
        res = run("search", "crisis escalation threshold", "--root", str(vault), "--index-dir",
                  str(index), "--json", "-k", "3", cache=tmp_path)
        assert res.returncode == 0, res.stderr
        assert "in use by another process" in res.stderr
        hits = json.loads(res.stdout)["results"]
        assert hits[0]["path"] == "operations/Crisis management and escalation.md"
        expected = holder.search("crisis escalation threshold", 3)
        assert [h["breadcrumb"] for h in hits] == [h.breadcrumb for h in expected]
        status = run("status", "--root", str(vault), "--index-dir", str(index), "--json",
                     cache=tmp_path)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["read_only"] is True
        related = run("related", "operations/Crisis management and escalation.md", "--line",
                      "26", "--root", str(vault), "--index-dir", str(index), "--json",
                      cache=tmp_path)
        assert related.returncode == 0, related.stderr
        assert json.loads(related.stdout)["results"]
        assert holder.manifest.generation == generation  # the reader wrote nothing
    finally:
        holder.close()
