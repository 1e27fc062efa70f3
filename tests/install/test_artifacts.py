"""What the release artifacts hold: a PyPI page that works away from the repository, an sdist
of the package with its tests and docs (not the benchmarks' results), and a model wheel that is
the model's files, their licence and nothing else, the same bytes at every build."""

from __future__ import annotations

import email
import hashlib
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

import mdsearch_ls

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
VERSION = mdsearch_ls.__version__


def wheel_metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_string(z.read(name).decode("utf-8"))


def targets_and_code(markdown: str) -> tuple[list[str], list[str]]:
    """Every link and image target of a markdown text, and every piece of code in it."""
    targets, code = [], []
    stack = list(MarkdownIt("commonmark").enable("table").parse(markdown))
    while stack:
        token = stack.pop()
        stack.extend(token.children or [])
        if token.type == "link_open":
            targets.append(str(token.attrs["href"]))
        elif token.type == "image":
            targets.append(str(token.attrs["src"]))
        elif token.type in ("fence", "code_block", "code_inline"):
            code.append(token.content)
    return targets, sorted(code)


def test_the_pypi_page_links_only_to_absolute_addresses(wheelhouse: Path) -> None:
    """PyPI shows the README away from the repository: every link and image is absolute, and
    making them so changed no code in it."""
    meta = wheel_metadata(wheelhouse.parent / f"mdsearch_ls-{VERSION}-py3-none-any.whl")
    assert meta["Description-Content-Type"].startswith("text/markdown")
    targets, code = targets_and_code(meta.get_payload())
    readme_targets, readme_code = targets_and_code((REPO / "README.md").read_text("utf-8"))
    assert len(targets) == len(readme_targets) > 10
    assert [t for t in targets if not t.startswith("https://")] == []
    assert code == readme_code
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert urls["Source"] == "https://github.com/mdsearch/mdsearch"


def test_the_sdist_holds_the_package_its_tests_and_docs(wheelhouse: Path) -> None:
    with tarfile.open(wheelhouse.parent / f"mdsearch_ls-{VERSION}.tar.gz") as t:
        tops = {Path(name).parts[1] for name in t.getnames() if len(Path(name).parts) > 1}
    assert {"mdsearch_ls", "tests", "docs", "examples", "README.md", "LICENSE",
            "pyproject.toml"} <= tops
    assert not tops & {"benchmarks", "vscode-extension", "obsidian-plugin", "dist", ".venv"}


def test_the_model_wheel_is_the_files_and_their_licence(wheelhouse: Path,
                                                         tmp_path: Path) -> None:
    """No dependency, the model's files, the Apache-2.0 licence and a notice; and built again
    from the installed copy of the same files, the same bytes (the build is reproducible and
    the files are the ones its checksums name)."""
    wheel = wheelhouse.parent / "mdsearch_model_minilm-1.0.0-py3-none-any.whl"
    meta = wheel_metadata(wheel)
    assert meta.get_all("Requires-Dist") is None
    assert meta["License-Expression"] == "Apache-2.0"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        licence = z.read("mdsearch_model_minilm-1.0.0.dist-info/licenses/LICENSE").decode()
        notice = z.read("mdsearch_model_minilm-1.0.0.dist-info/licenses/NOTICE").decode()
    model = "mdsearch_model_minilm/model/"
    assert {model + f for f in ("model.safetensors", "tokenizer.json", "config.json",
                                "modules.json", "1_Pooling/config.json", "README.md")} <= names
    assert "Apache License" in licence and "Version 2.0" in licence
    assert "all-MiniLM-L6-v2" in notice

    from mdsearch_model_minilm import MODEL_DIR

    subprocess.run([sys.executable, str(REPO / "scripts" / "build_model_wheel.py"),
                    "--source", str(MODEL_DIR), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    again = tmp_path / wheel.name
    assert hashlib.sha256(again.read_bytes()).digest() == hashlib.sha256(
        wheel.read_bytes()).digest()
