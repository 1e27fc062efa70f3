"""The rules the CLI and the server that holds an index both read from
``engine/service/resident_rules.py`` (issue 26): where the socket is, which folder may hold it,
and which settings must match for the server's answer to be the CLI's."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.service import resident_rules


@pytest.mark.parametrize("settings", [
    Settings(),
    Settings(include=("notes/**/*.md",), exclude=("drafts/**",), include_formats=("pdf",),
             fusion="rrf", per_file=3, chunk_size=600, chunk_overlap=100),
])
def test_only_settings_that_change_a_ranking_must_match(settings: Settings) -> None:
    mine = resident_rules.ranking_settings(settings)
    assert set(mine) == set(resident_rules.RANKING_FIELDS)
    other = dataclasses.replace(settings, mode="keyword", max_results=3)  # not ranking ones
    assert resident_rules.ranking_settings(other) == mine
    assert resident_rules.ranking_settings(dataclasses.replace(settings, fusion=(
        "convex" if settings.fusion == "rrf" else "rrf"))) != mine
    assert all(not isinstance(v, tuple) for v in mine.values())  # JSON values: lists


def test_the_socket_path_short_and_long(tmp_path: Path) -> None:
    short = tmp_path / "idx"
    long = tmp_path / ("x" * 120) / "idx"
    assert resident_rules.resident_socket_path(short) == short / "search.sock"
    moved = resident_rules.resident_socket_path(long)
    assert moved.parent.name == f"mdsearch-{os.getuid()}" and moved.suffix == ".sock"
    assert len(os.fsencode(str(moved))) < 100
    assert moved == resident_rules.resident_socket_path(long)  # both sides find the same one


def test_a_private_folder(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    assert resident_rules.private_dir(mine, create=True) and mine.is_dir()
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    assert not resident_rules.private_dir(shared, create=False)
    assert not resident_rules.private_dir(tmp_path / "absent", create=False)
