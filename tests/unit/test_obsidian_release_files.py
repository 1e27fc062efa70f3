"""The Obsidian plugin's release files at the repository root, and their one source.

BRAT and the community plugin list read ``manifest.json`` and ``versions.json`` at the root of
the repository; the plugin's folder keeps its own (it can live in a repository of its own).
``obsidian-plugin/scripts/release-files.mjs`` writes both pairs from package.json's version, so a
root copy edited by hand, or a plugin manifest changed without it, fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "obsidian-plugin"


@pytest.mark.parametrize("name", ["manifest.json", "versions.json"])
def test_the_root_copy_is_the_plugins_own(name: str) -> None:
    assert (REPO / name).read_bytes() == (PLUGIN / name).read_bytes(), (
        f"{name} at the root differs from obsidian-plugin/{name}: run "
        "`node scripts/release-files.mjs` in obsidian-plugin")


def test_the_release_version_maps_to_its_minimum_app_version() -> None:
    manifest = json.loads((REPO / "manifest.json").read_text("utf-8"))
    versions = json.loads((REPO / "versions.json").read_text("utf-8"))
    package = json.loads((PLUGIN / "package.json").read_text("utf-8"))
    assert manifest["version"] == package["version"]
    assert versions[manifest["version"]] == manifest["minAppVersion"]
