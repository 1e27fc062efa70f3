"""The server's side of the search socket (engine/service/resident.py), in process with the fake
embedder: what it answers while the folder's writer is still looking at the notes."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.service.folder import IndexedFolder
from mdsearch_ls.engine.service.resident_rules import PROTOCOL_RESIDENT, ranking_settings
from mdsearch_ls.engine.states import FolderState
from tests.conftest import FakeEmbedder, write_note


def request(query: str) -> dict[str, Any]:
    return {"v": PROTOCOL_RESIDENT, "settings": ranking_settings(Settings()), "update": True,
            "queries": [{"query": query, "k": 3, "mode": "keyword", "filters": None,
                         "min_score": None}]}


def test_a_search_during_a_look_at_the_notes_waits_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder a background process has just taken (or a server's first scan) is looking at
    the notes: a search arriving then waits for that look and is answered up to date, instead
    of "still being built" about an index that is whole on disk."""
    root = tmp_path / "vault"
    write_note(root, "a.md", "# Alpha\n\nalpha words\n")
    folder = IndexedFolder(root, Settings(), FakeEmbedder())  # type: ignore[arg-type]
    try:
        folder.start_index().result(timeout=30)
        resident = folder.resident
        assert resident is not None
        # the writer busy with a look at the notes, as at a start
        gate, waiting = threading.Event(), threading.Event()

        def look() -> None:
            gate.wait(30)
            folder.state = FolderState.READY

        folder.state = FolderState.INDEXING
        folder.submit(look)
        settled = folder.settled

        def noticed() -> Any:
            waiting.set()
            return settled()

        monkeypatch.setattr(folder, "settled", noticed)
        write_note(root, "b.md", "# Beta\n\nbeta zebra words\n")
        answers: list[dict[str, Any]] = []
        asking = threading.Thread(target=lambda: answers.append(resident.answer(
            request("zebra"))))
        asking.start()
        assert waiting.wait(30), "the request did not wait for the look under way"
        gate.set()
        asking.join(30)
        [answer] = answers
        assert answer["checked"] != "index still being built"
        assert [h["path"] for h in answer["results"][0]["hits"]] == ["b.md"]
        assert answer["results"][0]["index"]["state"] == "ready"
    finally:
        folder.close()
