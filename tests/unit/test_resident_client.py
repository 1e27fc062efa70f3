"""The two sides of the resident search socket agree (issue 26): the CLI reads the socket's place,
the folder check, the protocol and the ranking settings from ``engine/service/resident_rules.py``
(light, so a search answered by the server imports little), the server from its own module. Both
must give the same answers, or the CLI would look for a socket the server never opened, or send
settings the server always refuses."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from mdsearch_ls.config import Settings
from mdsearch_ls.engine.service import resident, resident_rules


def test_the_protocol_and_the_ranking_fields_are_the_servers() -> None:
    assert resident_rules.PROTOCOL_RESIDENT == resident.PROTOCOL_RESIDENT
    assert resident_rules.RANKING_FIELDS == resident.RANKING_FIELDS
    assert resident_rules.SOCKET_NAME == resident.SOCKET_NAME


@pytest.mark.parametrize("settings", [
    Settings(),
    Settings(include=("notes/**/*.md",), exclude=("drafts/**",), include_formats=("pdf",),
             fusion="rrf", per_file=3, chunk_size=600, chunk_overlap=100),
])
def test_ranking_settings_are_the_servers(settings: Settings) -> None:
    assert resident_rules.ranking_settings(settings) == resident.ranking_settings(settings)
    other = dataclasses.replace(settings, mode="keyword", max_results=3)  # not ranking ones
    assert resident_rules.ranking_settings(other) == resident.ranking_settings(settings)


def test_the_socket_path_is_the_servers_short_and_long(tmp_path: Path) -> None:
    short = tmp_path / "idx"
    long = tmp_path / ("x" * 120) / "idx"
    assert resident_rules.resident_socket_path(short) == short / "search.sock"
    assert resident_rules.resident_socket_path(short) == resident.resident_socket_path(short)
    moved = resident_rules.resident_socket_path(long)
    assert moved.parent.name == f"mdsearch-{os.getuid()}" and moved.suffix == ".sock"
    assert moved == resident.resident_socket_path(long)


def test_a_private_folder_is_the_servers(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    assert resident_rules.private_dir(mine, create=True) and mine.is_dir()
    assert resident.private_dir(mine, create=False)
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    assert not resident_rules.private_dir(shared, create=False)
    assert not resident.private_dir(shared, create=False)
    assert not resident_rules.private_dir(tmp_path / "absent", create=False)
