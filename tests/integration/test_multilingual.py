"""The multilingual option on the real models: a question in German finds an English note, and
switching models rebuilds into a space of its own (never comparing one model's query with the
other's vectors), saying so, in the engine and in a real ``mdsearch`` process run offline."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.api import SearchRequest
from mdsearch_ls.engine.workspace import Workspace
from tests.conftest import write_note
from tests.integration.conftest import run_cli

pytestmark = pytest.mark.slow

NOTES = {
    "backups.md": "# Database backups\n\nEvery night at two the database is dumped and the "
                  "dump is copied to the offsite storage bucket. Keep thirty days of dumps.\n",
    "onboarding.md": "# Onboarding\n\nA new colleague gets a laptop, an account and a buddy "
                     "for the first week.\n",
    "coffee.md": "# Coffee machine\n\nDescale the coffee machine every month with the citric "
                 "acid in the kitchen cupboard.\n",
    "travel.md": "# Travel expenses\n\nTrain tickets and hotel receipts are reimbursed within "
                 "a month when sent to accounting.\n",
    "vpn.md": "# VPN access\n\nConnect to the office network from home with the VPN client and "
              "your hardware token.\n",
    "garden.md": "# Roof garden\n\nWater the tomatoes on the roof terrace in summer, twice a "
                 "week.\n",
}
GERMAN = "Wie oft wird die Datenbank gesichert?"


def make_vault(root: Path) -> Path:
    for rel, text in NOTES.items():
        write_note(root, rel, text)
    return root


def search(ws: Workspace, text: str, k: int, mode: str | None = None) -> list:
    return ws.search(SearchRequest.build(text, k=k, mode=mode)).hits


def vector_dims(manifest: Path) -> set[int]:
    with sqlite3.connect(manifest) as conn:
        return {len(blob) // 4 for (blob,) in conn.execute("SELECT vector FROM vectors")}


def test_a_german_question_finds_the_english_note(
    tmp_path: Path, multilingual_embedder: object
) -> None:
    vault = make_vault(tmp_path / "notes")
    settings = Settings(model="multilingual")
    with Workspace.open(vault, settings, embedder=multilingual_embedder,  # type: ignore[arg-type]
                        index_dir=tmp_path / "index") as ws:
        ws.index()
        for mode in ("semantic", "hybrid"):
            hits = search(ws, GERMAN, 3, mode=mode)
            assert hits and hits[0].path == "backups.md", (mode, [h.path for h in hits])
        # Chinese and French questions too, each to its own note.
        assert search(ws, "如何连接公司网络", 1, mode="semantic")[0].path == "vpn.md"
        french = "Quand faut-il détartrer la machine à café ?"
        assert search(ws, french, 1, mode="semantic")[0].path == "coffee.md"


def test_switching_models_rebuilds_in_a_space_of_its_own_and_back_costs_nothing(
    tmp_path: Path, real_embedder: object, multilingual_embedder: object
) -> None:
    vault = make_vault(tmp_path / "notes")
    index = tmp_path / "index"
    english, multi = Settings(), Settings(model="multilingual")
    with Workspace.open(vault, english, embedder=real_embedder,  # type: ignore[arg-type]
                        index_dir=index) as ws:
        assert ws.switched is None  # a first index switches from nothing
        assert ws.index().files_indexed == len(NOTES)
        minilm_manifest = ws.index_dir / f"{ws.space}.sqlite3"
    with Workspace.open(vault, multi, embedder=multilingual_embedder,  # type: ignore[arg-type]
                        index_dir=index) as ws:
        assert ws.switched is not None
        assert "all-MiniLM-L6-v2" in ws.switched and "use-multilingual-v3" in ws.switched
        assert "embedded again" in ws.switched
        assert ws.index().files_indexed == len(NOTES)  # every note, with the new model
        multi_manifest = ws.index_dir / f"{ws.space}.sqlite3"
        assert multi_manifest != minilm_manifest
        assert ws.status()["model"] == "use-multilingual-v3"
        assert search(ws, GERMAN, 1)[0].path == "backups.md"
    # Each space holds its own model's vectors only: 384 numbers for MiniLM, 512 for USE.
    assert vector_dims(minilm_manifest) == {384}
    assert vector_dims(multi_manifest) == {512}
    with Workspace.open(vault, english, embedder=real_embedder,  # type: ignore[arg-type]
                        index_dir=index) as ws:
        assert ws.switched is None  # its space was kept: nothing to say, nothing to embed
        assert ws.index().files_indexed == 0
        hits = search(ws, "nightly database dump", 1)
        assert hits[0].path == "backups.md"
        assert all(len(v) == 384 for v in ws.manifest.sample_vectors(4))
    assert vector_dims(minilm_manifest) == {384} and vector_dims(multi_manifest) == {512}


def _offline_prefix() -> list[str]:
    """``unshare -n -r``: the command runs with no network at all, where the system allows it."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "-r", "true"],
                                  capture_output=True).returncode == 0:
        return [unshare, "-n", "-r"]
    return []


def test_cli_switches_model_says_so_and_searches_offline(
    tmp_path: Path, real_embedder: object, multilingual_embedder: object
) -> None:
    vault = make_vault(tmp_path / "notes")
    cache = tmp_path / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MDSEARCH_CACHE_DIR", str(cache))
        with Workspace.open(vault, Settings(), embedder=real_embedder) as ws:  # type: ignore[arg-type]
            ws.index()
    # A read-only search with a model the folder was not indexed with says which it has.
    res = run_cli("search", GERMAN, "--model", "multilingual", "--no-update", "--root",
                  str(vault), cache=cache)
    assert res.returncode != 0
    assert "indexed with all-MiniLM-L6-v2, not with use-multilingual-v3" in res.stderr
    # A search that may update builds the multilingual index first, saying why, with no network.
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    res = subprocess.run(
        [*_offline_prefix(), sys.executable, "-m", "mdsearch_ls", "search", GERMAN, "--model",
         "multilingual", "--root", str(vault), "--json", "-k", "2"],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert res.returncode == 0, res.stderr
    assert "every note is embedded again" in res.stderr
    out = json.loads(res.stdout)
    assert out["results"][0]["path"] == "backups.md"
    assert len(out["results"]) == 2 and out["results"][0]["score"] > out["results"][1]["score"]
