"""``server.json``, the package's entry for the MCP registry, kept true: valid against the
registry's own schema, the package's name and version, and ``mdsearch mcp``'s real arguments;
the command a registry client makes of it (``uvx mdsearch-ls mcp --root FOLDER``) started for
real, with this install's ``mdsearch-ls`` in place of uvx's download.

``registry-server.schema.json`` is the registry's schema 2025-12-11 as its publisher validates
with (modelcontextprotocol/registry, ``internal/validators/schemas/2025-12-11.json``, MIT), kept
here so the test needs no network."""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest
import tomllib
from mcp_harness import PYTHON, start

from mdsearch_ls import __version__
from mdsearch_ls.cli.parser import build_parser

REPO = Path(__file__).resolve().parents[2]
SERVER_JSON = json.loads((REPO / "server.json").read_text())
SCHEMA = json.loads(Path(__file__).with_name("registry-server.schema.json").read_text())
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
VAULT = REPO / "tests" / "fixtures" / "lsp-vault"
(PACKAGE,) = SERVER_JSON["packages"]


def mcp_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["mcp"]


def client_command(folder: Path) -> list[str]:
    """What a registry client runs for the package (runtimeHint uvx): the package's own command,
    then its packageArguments, each named one given the folder the user chose."""
    args = [PACKAGE["identifier"]]
    for arg in PACKAGE["packageArguments"]:
        if arg["type"] == "positional":
            args.append(arg["value"])
        elif arg.get("isRequired"):
            args += [arg["name"], str(folder)]
    return args


def test_valid_against_the_registry_schema() -> None:
    assert SERVER_JSON["$schema"] == SCHEMA["$id"]
    jsonschema.Draft7Validator(SCHEMA).validate(SERVER_JSON)


def test_the_package_and_its_version() -> None:
    assert PACKAGE["registryType"] == "pypi" and PACKAGE["registryBaseUrl"] == "https://pypi.org"
    assert PACKAGE["identifier"] == PROJECT["name"]
    assert SERVER_JSON["version"] == PACKAGE["version"] == __version__
    assert PACKAGE["transport"] == {"type": "stdio"} and PACKAGE["runtimeHint"] == "uvx"


def test_the_registry_can_verify_the_package_is_ours() -> None:
    """The registry looks for ``mcp-name: NAME`` in the package's description on PyPI."""
    (fragment,) = PYPROJECT["tool"]["hatch"]["metadata"]["hooks"]["fancy-pypi-readme"]["fragments"]
    readme = (REPO / fragment["path"]).read_text()
    assert f"mcp-name: {SERVER_JSON['name']}" in readme


def test_the_arguments_are_mdsearch_mcps() -> None:
    """uvx runs the script named like the package: it is the ``mdsearch`` command, and every
    argument the entry names is an option of ``mdsearch mcp``, with its choices and default."""
    scripts = PROJECT["scripts"]
    assert scripts[PACKAGE["identifier"]] == scripts["mdsearch"]
    options = {s: a for a in mcp_parser()._actions for s in a.option_strings}
    for arg in PACKAGE["packageArguments"]:
        if arg["type"] == "named":
            action = options[arg["name"]]
            assert isinstance(action, argparse._AppendAction) == arg.get("isRepeated", False)
            if "choices" in arg:
                assert arg["choices"] == list(action.choices)
                assert arg["default"] in action.choices
                assert re.search(rf"\(default {arg['default']}\)", action.help)
    parsed = build_parser().parse_args(client_command(VAULT)[1:])
    assert parsed.command == "mcp" and parsed.root == [str(VAULT)]


@pytest.mark.slow
def test_the_command_a_registry_client_runs_serves(tmp_path: Path) -> None:
    vault_copy = tmp_path / "notes"
    shutil.copytree(VAULT, vault_copy)
    command = client_command(vault_copy)
    command[0] = str(Path(PYTHON).parent / command[0])  # the script uvx would have installed
    client = start(tmp_path, [vault_copy], command=command)
    try:
        tools = client.run(lambda s: s.list_tools()).tools
        assert len(tools) == 5
        client.wait_ready()
        hits = client.call("search_markdown", {"query": "feeding a sourdough starter"})
        assert hits.structured_content["results"][0]["path"] == "sourdough.md"
    finally:
        client.close()
