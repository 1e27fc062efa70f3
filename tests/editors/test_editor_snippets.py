"""The snippets of docs/editors.md for editors that cannot be installed here (Helix, Sublime
Text, Kate), parsed as their editor reads them and checked: each starts ``mdsearch serve`` on
markdown files, with settings the server accepts. And no snippet on the page escapes a test:
each tagged block is one that this module or the Neovim and Emacs tests run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import tomllib

from mdsearch_ls.cli.parser import build_parser
from mdsearch_ls.config import settings_from_client

REPO = Path(__file__).resolve().parents[2]
EDITORS_DOC = REPO / "docs" / "editors.md"

# tag -> the test that runs or checks it
TESTED = {
    "nvim-0.11": "test_neovim.py", "nvim-0.11-config": "test_neovim.py",
    "nvim-0.8": "test_neovim.py", "nvim-0.7": "test_neovim.py",
    "eglot": "test_emacs.py", "lsp-mode": "test_emacs.py",
    "helix": "here", "sublime": "here", "kate": "here",
}


def blocks() -> dict[str, str]:
    """Every fenced block of the page with a tag after its language (```toml helix): tag -> its
    text."""
    found: dict[str, str] = {}
    for tag, text in re.findall(r"^```\w+ ([\w.-]+)\n(.*?)^```$", EDITORS_DOC.read_text(),
                                re.S | re.M):
        assert tag not in found, f"two blocks tagged {tag}"
        found[tag] = text
    return found


def assert_starts_the_server(command: list[str]) -> None:
    assert command[0] == "mdsearch", command
    assert build_parser().parse_args(command[1:]).command == "serve", command


def assert_valid_settings(options: Any) -> None:
    settings, warnings = settings_from_client(options)
    assert not warnings, warnings
    assert settings.max_results == 10  # the page's example setting, read as the server reads it


def test_every_snippet_is_tested() -> None:
    assert set(blocks()) == set(TESTED)


def test_helix_languages_toml() -> None:
    config = tomllib.loads(blocks()["helix"])
    server = config["language-server"]["mdsearch"]
    assert_starts_the_server([server["command"], *server["args"]])
    assert_valid_settings(server["config"])  # Helix sends it as initializationOptions
    markdown = [entry for entry in config["language"] if entry["name"] == "markdown"]
    assert len(markdown) == 1 and "mdsearch" in markdown[0]["language-servers"]


def test_sublime_lsp_settings() -> None:
    client = json.loads(blocks()["sublime"])["clients"]["mdsearch"]
    assert client["enabled"] is True
    assert_starts_the_server(client["command"])
    assert "text.html.markdown" in client["selector"]  # the scope of Sublime's Markdown syntax
    assert_valid_settings(client["initializationOptions"])


def test_kate_lsp_client_settings() -> None:
    server = json.loads(blocks()["kate"])["servers"]["markdown"]
    assert_starts_the_server(server["command"])
    assert re.search(server["highlightingModeRegex"], "Markdown")  # Kate's mode name
    assert ".obsidian" in server["rootIndicationFileNames"]
    assert_valid_settings(server["initializationOptions"])
