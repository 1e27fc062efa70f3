"""Invalid settings: a window/showMessage warning naming the setting, then defaults."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types

from .conftest import Server, copy_vault, start_server
from .helpers import expected_counts


def warnings(server: Server) -> list[str]:
    return [m.message for m in server.client.messages if m.type == types.MessageType.Warning]


async def test_invalid_init_option_warns_and_defaults_apply(alt: Server) -> None:
    msgs = warnings(alt)
    assert any("chunkSize" in m for m in msgs), msgs
    # chunking fell back to the default: the same chunk count as a default index
    st = await alt.status()
    files, chunks = expected_counts(alt.root)
    assert st["folders"][0]["files"] == files
    assert st["folders"][0]["chunks"] == chunks
    # valid options given alongside still apply
    assert len(await alt.symbols("notes about anything")) <= 7
    hits = await alt.search("sourdough starter feeding", limit=2)
    assert hits and hits[0]["path"] == "sourdough.md"


async def test_invalid_setting_from_configuration_change(alt_own: Server) -> None:
    alt = alt_own
    alt.client.set_configuration({"hover": {"minScore": 7}}, section="mdsearch")
    alt.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"mdsearch": {"hover": {"minScore": 7}}})
    )

    async def warned() -> bool:
        await asyncio.sleep(0)
        return any("hover.minScore" in m for m in warnings(alt))

    await alt.wait_for(warned, timeout=20)
    st = await alt.status()
    assert st["state"] in ("ready", "indexing")
    # Configuration is layered over initializationOptions: keys it does not mention keep their
    # initial values, and the invalid minScore falls back to the one given at start (0.99).
    assert len(await alt.symbols("notes about anything")) == 7
    hits = await alt.search("telescope aperture", limit=1)
    assert hits[0]["path"] == "hobbies/stargazing.md"
    result = await alt.client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=alt.uri("flour.md")),
            position=types.Position(line=6, character=0),
        )
    )
    assert result is None, "hover.minScore should stay at its initializationOptions value"
    # A valid configuration value does override it.
    alt.client.set_configuration({"hover": {"minScore": 0.1}}, section="mdsearch")
    alt.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"mdsearch": {"hover": {"minScore": 0.1}}})
    )

    async def hovered() -> bool:
        got = await alt.client.text_document_hover_async(
            types.HoverParams(
                text_document=types.TextDocumentIdentifier(uri=alt.uri("flour.md")),
                position=types.Position(line=6, character=0),
            )
        )
        return got is not None

    await alt.wait_for(hovered, timeout=20)


async def test_settings_scoped_to_a_folder_apply_to_that_folder_only(tmp_path: Path) -> None:
    """A client answers workspace/configuration per folder (VS Code's resource settings):
    an exclude scoped to one folder leaves the other whole."""
    one = copy_vault(tmp_path / "one")
    two = copy_vault(tmp_path / "two")
    server = await start_server([one, two], tmp_path / "cache",
                                scoped={one: {"exclude": ["hobbies/"]}})
    try:
        st = await server.wait_ready()
        files = {Path(f["root"]).name: f["files"] for f in st["folders"]}
        total, _ = expected_counts(two)
        hobbies = len(list((two / "hobbies").rglob("*.md")))
        assert hobbies and files == {"one": total - hobbies, "two": total}
        hits = await server.search("telescope aperture", limit=5)
        assert {Path(h["root"]).name for h in hits if h["path"].startswith("hobbies/")} == {"two"}
    finally:
        await server.stop()
