#!/usr/bin/env bash
# The whole test suite: the Python package (unit, integration on the real model, language server
# end to end, Neovim), then the VS Code extension's checks and its end-to-end test in code-server.
#   MDSEARCH_SKIP_EXTENSION=1  only the Python suite
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
.venv/bin/python -m pytest "$@" || status=$?
if [[ $status -eq 5 ]]; then
  echo "pytest collected no tests: that is a failure" >&2
  exit 1
fi
[[ $status -eq 0 ]] || exit $status
.venv/bin/ruff check .
if [[ -z ${MDSEARCH_SKIP_EXTENSION:-} && -f vscode-extension/scripts/ci.sh ]]; then
  MDSEARCH_PYTHON="$PWD/.venv/bin/python" bash vscode-extension/scripts/ci.sh
fi
