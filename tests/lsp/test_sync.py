"""Saves, watcher events and renames keep the index fresh; saves coalesce, the latest wins.

Each test works on notes it creates, so the shared server's fixture notes stay as they are.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types

from .conftest import Server


def save(server: Server, path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    server.client.text_document_did_save(
        types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=path.as_uri()))
    )


def watched(server: Server, *changes: tuple[Path, types.FileChangeType]) -> None:
    server.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=p.as_uri(), type=t) for p, t in changes]
        )
    )


async def paths_for(server: Server, query: str, mode: str = "keyword") -> set[str]:
    return {h["path"] for h in await server.search(query, mode=mode, limit=20)}


async def wait_paths(server: Server, query: str, want: set[str], *, mode: str = "keyword",
                     absent: set[str] = frozenset()) -> set[str]:
    async def check() -> set[str] | None:
        found = await paths_for(server, query, mode)
        return found if want <= found and not (absent & found) else None

    return await server.wait_for(check, timeout=60)


async def test_save_reindexes_new_text(main: Server) -> None:
    path = main.root / "journal" / "aquarium.md"
    save(main, path, "# Aquarium\n\n## Setup\n\nThe zebrafish quarxle tank needs a heater.\n")
    await wait_paths(main, "quarxle", {"journal/aquarium.md"})

    save(main, path, "# Aquarium\n\n## Setup\n\nThe tank now holds blorptastic guppies and a "
                     "canister filter that cleans the water.\n")
    await wait_paths(main, "blorptastic", {"journal/aquarium.md"})
    assert "journal/aquarium.md" not in await paths_for(main, "quarxle")
    sem = await main.search("freshwater fish in a glass tank with a filter", mode="semantic",
                            limit=3)
    assert sem[0]["path"] == "journal/aquarium.md"
    assert sem[0]["title"] in ("Aquarium", "Setup")


async def test_two_quick_saves_coalesce_and_latest_wins(main: Server) -> None:
    path = main.root / "journal" / "quick.md"
    save(main, path, "# Quick\n\nfirst version with snorfblat words\n")
    save(main, path, "# Quick\n\nsecond version with wibbleflux words\n")
    await wait_paths(main, "wibbleflux", {"journal/quick.md"})
    await main.wait_ready()
    assert "journal/quick.md" not in await paths_for(main, "snorfblat")
    st = await main.status()
    assert st["folders"][0]["last_error"] is None


async def test_watched_create_and_delete(main: Server) -> None:
    path = main.root / "journal" / "gone.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Ephemeral\n\nA note about the plimquat festival.\n", encoding="utf-8")
    watched(main, (path, types.FileChangeType.Created))
    await wait_paths(main, "plimquat", {"journal/gone.md"})
    path.unlink()
    watched(main, (path, types.FileChangeType.Deleted))

    async def gone() -> bool:
        return "journal/gone.md" not in await paths_for(main, "plimquat")

    await main.wait_for(gone)
    sym = await main.symbols("plimquat festival")
    assert all(not s.location.uri.endswith("/journal/gone.md") for s in sym)


async def test_rename_through_watcher_events(main: Server) -> None:
    old = main.root / "journal" / "old-name.md"
    new = main.root / "journal" / "new-name.md"
    old.parent.mkdir(parents=True, exist_ok=True)
    old.write_text("# Kayaking\n\nPaddling the trevvolant river in spring.\n", encoding="utf-8")
    watched(main, (old, types.FileChangeType.Created))
    await wait_paths(main, "trevvolant", {"journal/old-name.md"})
    old.rename(new)
    watched(main, (old, types.FileChangeType.Deleted), (new, types.FileChangeType.Created))
    await wait_paths(main, "trevvolant", {"journal/new-name.md"}, absent={"journal/old-name.md"})


async def test_did_rename_files(main: Server) -> None:
    old = main.root / "journal" / "draft.md"
    new = main.root / "archive" / "final.md"
    save(main, old, "# Pottery\n\nThrowing a glorbish bowl on the wheel.\n")
    await wait_paths(main, "glorbish", {"journal/draft.md"})
    new.parent.mkdir(parents=True, exist_ok=True)
    old.rename(new)
    main.client.workspace_did_rename_files(
        types.RenameFilesParams(files=[types.FileRename(old_uri=old.as_uri(),
                                                        new_uri=new.as_uri())])
    )
    await wait_paths(main, "glorbish", {"archive/final.md"}, absent={"journal/draft.md"})
    sem = await main.symbols("shaping clay on a pottery wheel")
    assert sem and sem[0].location.uri == new.as_uri()
    await asyncio.sleep(0)


async def test_changes_on_disk_reach_the_index_without_a_word_from_the_client(
    main: Server,
) -> None:
    """The server watches the notes it holds: a note written and a .gitignore that hides it
    are seen with no save and no file event from the client (the rescan comes from the
    watcher's thread, and must reach the event loop)."""
    note = main.root / "scratch" / "unsent.md"
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text("# Unsent\n\nA letter about the vrombulous harbour.\n", encoding="utf-8")
    await wait_paths(main, "vrombulous", {"scratch/unsent.md"})
    ignore = main.root / ".gitignore"
    ignore.write_text("scratch/\n", encoding="utf-8")

    async def hidden() -> bool:
        return "scratch/unsent.md" not in await paths_for(main, "vrombulous")

    try:
        await main.wait_for(hidden, timeout=60)
    finally:
        ignore.unlink()
        note.unlink()
