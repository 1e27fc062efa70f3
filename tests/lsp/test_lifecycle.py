"""initialize answers at once; the first index runs in the background with progress."""

from __future__ import annotations

from lsprotocol import types

from .conftest import Server
from .helpers import expected_counts


async def test_initialize_is_fast(main: Server) -> None:
    print(f"[{main.profile}] process start -> initialize response: {main.init_seconds:.2f}s")
    assert main.init_seconds < 5.0
    caps = main.init_result.capabilities
    assert caps.workspace_symbol_provider
    assert caps.hover_provider
    assert set(caps.execute_command_provider.commands) >= {
        "mdsearch.search", "mdsearch.related", "mdsearch.reindex", "mdsearch.status"
    }


async def test_progress_begin_and_end(main: Server) -> None:
    begins = main.progress_begins()
    assert any(b.title == "Indexing notes" for b in begins), main.client.progress_reports
    ends = main.progress_ends()
    assert ends, main.client.progress_reports
    files, chunks = expected_counts(main.root)
    assert any(f"{files} files" in e and f"{chunks} chunks" in e for e in ends), ends


async def test_status_ready_with_counts(main: Server) -> None:
    st = main.extra["ready"]
    files, chunks = expected_counts(main.root)
    assert st["state"] == "ready"
    (folder,) = st["folders"]
    assert folder["files"] == files == 6
    assert folder["chunks"] == chunks
    # the custom notification reached the client too, and said ready at some point
    # (it trails the status command by at most the 250 ms it is throttled to)
    async def ready_note() -> bool:
        return any(getattr(n, "state", None) == "ready" for n in main.client.status_notes)

    await main.wait_for(ready_note, timeout=5)


async def test_configuration_registered_when_client_can(main: Server) -> None:
    """The server asks for what it needs (the mdsearch settings), so a client sends no
    ``synchronize`` options; a client that cannot register dynamically is asked nothing. File
    events are not asked for: the server watches the notes of the folders it holds itself."""
    regs = getattr(main.client, "registrations", [])
    methods = {r.method for r in regs}
    caps = main.client.capabilities
    workspace = caps.workspace if caps is not None else None
    config = workspace.did_change_configuration if workspace is not None else None
    assert types.WORKSPACE_DID_CHANGE_WATCHED_FILES not in methods
    if config is not None and config.dynamic_registration:
        (reg,) = [r for r in regs if r.method == types.WORKSPACE_DID_CHANGE_CONFIGURATION]
        assert reg.register_options == {"section": "mdsearch"}
    else:
        assert types.WORKSPACE_DID_CHANGE_CONFIGURATION not in methods


async def test_model_loading_has_its_own_progress(main: Server) -> None:
    """The model's load is a work-done progress of its own, begun and ended."""
    tokens = [t for t, values in main.client.progress_reports.items()
              if any(isinstance(v, types.WorkDoneProgressBegin) and v.title == "Loading model"
                     for v in values)]
    assert len(tokens) == 1, main.client.progress_reports
    ends = [v for v in main.client.progress_reports[tokens[0]]
            if isinstance(v, types.WorkDoneProgressEnd)]
    assert [e.message for e in ends] == ["loaded"]
