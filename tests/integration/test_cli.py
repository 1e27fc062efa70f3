"""The ``mdsearch`` command as a user runs it: a real process, the real model, a real index."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.workspace import Workspace
from tests.integration.conftest import IndexedVault, run_cli

pytestmark = [pytest.mark.slow, pytest.mark.portable]

HIT_FIELDS = {"path", "title", "breadcrumb", "start_line", "end_line", "score", "snippet",
              "line", "file", "keyword_rank"}
CRISIS = "operations/Crisis management and escalation.md"


def test_search_json_shape_and_ranking(indexed_vault: IndexedVault) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    res = run_cli("search", "crisis escalation threshold", "--json", "-k", "3", cache=cache,
                  cwd=vault)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert set(out) == {"query", "root", "results", "notes", "index"}
    assert out["query"] == "crisis escalation threshold"
    assert Path(out["root"]) == vault.resolve()
    assert out["index"] == {"state": "ready", "files_done": 20, "files_total": 20}
    assert 1 <= len(out["results"]) <= 3
    for hit in out["results"]:
        assert set(hit) == HIT_FIELDS
        assert 0 <= hit["start_line"] <= hit["end_line"]
        assert hit["line"] == hit["start_line"] + 1  # 1-based for people, 0-based ranges kept
        assert Path(hit["file"]) == vault.resolve() / hit["path"]
        assert -1 <= hit["score"] <= 1
        assert "**" not in hit["snippet"] and "\n" not in hit["snippet"]
    assert out["results"][0]["path"] == CRISIS
    # The index is a cache outside the notes: nothing was written into the vault.
    assert not any(p.name.endswith((".sqlite3", ".lock")) for p in vault.rglob("*"))


def test_search_text_names_path_line_and_similarity(indexed_vault: IndexedVault) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    as_json = run_cli("search", "crisis escalation threshold", "--json", "-k", "2", cache=cache,
                      cwd=vault)
    text = run_cli("search", "crisis escalation threshold", "-k", "2", cache=cache, cwd=vault)
    assert text.returncode == 0, text.stderr
    best = json.loads(as_json.stdout)["results"][0]
    lines = text.stdout.splitlines()
    start, end = best["start_line"] + 1, best["end_line"] + 1
    # Inside the vault the path is relative to it (what a terminal opens on a click).
    assert lines[0] == (f" 1. {best['path']}:{start}  "
                        f"(lines {start}-{end}, similarity {best['score']:.2f})")
    assert lines[1].strip() == best["breadcrumb"]
    # From elsewhere, the same hit is named by a path that opens from there.
    outside = run_cli("search", "crisis escalation threshold", "-k", "1", "--root", str(vault),
                      cache=cache, cwd=vault.parent)
    assert outside.stdout.splitlines()[0].startswith(f" 1. vault/{best['path']}:{start} ")


def test_queries_file_loads_the_model_once(indexed_vault: IndexedVault, tmp_path: Path) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    queries = tmp_path / "q.txt"
    lines = ["revenue tracking", json.dumps({"query": "security protocols", "id": 7}),
             "", "token efficiency"]
    queries.write_text("\n".join(lines) + "\n", encoding="utf-8")
    t0 = time.perf_counter()
    res = run_cli("search", "--queries", str(queries), "--json", cache=cache, cwd=vault)
    elapsed = time.perf_counter() - t0
    assert res.returncode == 0, res.stderr
    objs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [o["query"] for o in objs] == ["revenue tracking", "security protocols",
                                         "token efficiency"]
    assert objs[0]["results"][0]["path"] == "finance/Revenue tracking.md"
    # Three model loads would take well over a minute here; one load plus three queries less.
    assert elapsed < 90


def test_status_json(indexed_vault: IndexedVault) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    res = run_cli("status", "--root", str(vault), "--json", cache=cache)
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["files"] == 20 and info["chunks"] > 100
    assert info["model"] == "all-MiniLM-L6-v2"
    assert info["index"]["state"] == "ready"
    assert info["held_by"] is None  # nothing holds it but the command that asked


def test_bad_filter_value_is_a_usage_error(indexed_vault: IndexedVault) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    res = run_cli("search", "modified:yesterday invoices", "--mode", "keyword", "--no-update",
                  cache=cache, cwd=vault)
    assert res.returncode == 2
    assert "modified:yesterday" in res.stderr and "expected a date" in res.stderr
    assert res.stdout == ""


def test_filter_flags_match_inline_filters(indexed_vault: IndexedVault) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    common = ("--mode", "keyword", "--no-update", "--json", "-k", "10")
    flags = run_cli("search", "policy", "--path", "finance/", *common, cache=cache, cwd=vault)
    inline = run_cli("search", "policy path:finance/", *common, cache=cache, cwd=vault)
    assert flags.returncode == 0 and inline.returncode == 0, flags.stderr + inline.stderr
    got = [h["path"] for h in json.loads(flags.stdout)["results"]]
    assert got and all(p.startswith("finance/") for p in got)
    assert got == [h["path"] for h in json.loads(inline.stdout)["results"]]
    bad = run_cli("search", "policy", "--modified", "last week", *common, cache=cache,
                  cwd=vault)
    assert bad.returncode == 2 and "expected a date" in bad.stderr


def test_missing_root_exits_2(tmp_path: Path) -> None:
    res = run_cli("search", "anything", "--root", str(tmp_path / "nope"), cache=tmp_path)
    assert res.returncode == 2
    assert "not found" in res.stderr


def test_bad_chunk_size_exits_2_naming_the_flag(tmp_path: Path) -> None:
    from tests.conftest import copy_vault

    vault = copy_vault(tmp_path / "small")
    res = run_cli("index", str(vault), "--chunk-size", "-5", cache=tmp_path / "cache")
    assert res.returncode == 2
    assert "--chunk-size" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "cache").exists()


def test_a_lock_whose_holder_does_not_answer_exits_3(tmp_path: Path,
                                                     fake_embedder: object) -> None:
    """A process that holds the lock and never answers (it hangs between taking the lock and
    listening): the command looks again for a few seconds, then says so and exits 3."""
    from tests.conftest import copy_vault

    vault = copy_vault(tmp_path / "vault")
    index = tmp_path / "index"
    holder = Workspace(vault, Settings(), fake_embedder, index_dir=index)  # type: ignore[arg-type]
    try:
        t0 = time.perf_counter()
        res = run_cli("index", str(vault), "--index-dir", str(index), cache=tmp_path)
        assert res.returncode == 3, res.stderr
        assert "holds the index" in res.stderr and "does not answer" in res.stderr
        assert time.perf_counter() - t0 < 30  # fails in seconds: no model load, no hang
    finally:
        holder.close()


def test_an_index_a_server_holds_is_asked_of_it(tmp_path: Path, real_embedder: object) -> None:
    """An editor's server holds the index: search, related, status and index are asked of it,
    answer what it answers, and a note changed since is in the next answer once the server's
    watch has seen it."""
    from mdsearch_ls.engine.api import Folders, SearchRequest
    from tests.conftest import copy_vault
    from tests.mcp.mcp_harness import wait_until

    vault = copy_vault(tmp_path / "vault")
    index = tmp_path / "index"
    settings = Settings(index_dir=str(index))
    server = Folders(settings, embedder=real_embedder)  # type: ignore[arg-type]
    try:
        folder = server.add(vault, settings)
        folder.start_index().result(timeout=300)
        res = run_cli("search", "crisis escalation threshold", "--root", str(vault),
                      "--index-dir", str(index), "--json", "-k", "3", cache=tmp_path)
        assert res.returncode == 0, res.stderr
        hits = json.loads(res.stdout)["results"]
        assert hits[0]["path"] == CRISIS
        expected = folder.search(SearchRequest.build("crisis escalation threshold", k=3)).hits
        assert [h["breadcrumb"] for h in hits] == [h.breadcrumb for h in expected]
        # --index-dir alone is enough: it records the folder it was built from.
        status = run_cli("status", "--index-dir", str(index), "--json", cache=tmp_path)
        assert status.returncode == 0, status.stderr
        info = json.loads(status.stdout)
        assert info["held_by"] == {"pid": os.getpid(), "role": "server"}
        assert Path(info["root"]) == vault.resolve()
        related = run_cli("related", CRISIS, "--line", "27", "--root", str(vault),
                          "--index-dir", str(index), "--json", cache=tmp_path)
        assert related.returncode == 0, related.stderr
        assert json.loads(related.stdout)["results"]
        (vault / "New note.md").write_text("# New\n\nA crisis drill every quarter.\n", "utf-8")

        def found() -> bool:
            fresh = run_cli("search", "crisis drill", "--root", str(vault), "--index-dir",
                            str(index), "--json", cache=tmp_path)
            return "New note.md" in {h["path"] for h in json.loads(fresh.stdout)["results"]}

        wait_until(found, 60, "the server's watch indexed the new note")
        index_run = run_cli("index", str(vault), "--index-dir", str(index), cache=tmp_path)
        assert index_run.returncode == 0 and "21 files" in index_run.stdout, index_run.stderr
    finally:
        server.close(timeout=30)


def test_a_chinese_note_is_found_by_a_two_character_word(tmp_path: Path) -> None:
    """Issue 24: 密钥 sits inside the run 如何管理密钥和密码管理器; keyword mode missed it (FTS5
    kept the run as one token). The real CLI and model, keyword and hybrid mode."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "安全.md").write_text("# 密码安全\n\n如何管理密钥和密码管理器，保护你的账户。\n",
                                  encoding="utf-8")
    (vault / "garden.md").write_text("# Garden\n\nTomatoes need full sun and deep watering.\n",
                                     encoding="utf-8")
    for mode in ("keyword", "hybrid"):
        res = run_cli("search", "密钥", "--root", str(vault), "--mode", mode, "--json", "-k", "1",
                      cache=tmp_path)
        assert res.returncode == 0, res.stderr
        top = json.loads(res.stdout)["results"][0]
        assert top["path"] == "安全.md", (mode, top)
        assert "密钥" in top["snippet"]
