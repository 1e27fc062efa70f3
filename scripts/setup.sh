#!/usr/bin/env bash
# Sets up .venv with mdsearch and its test tools. Safe to re-run: it only installs what is missing.
#   MDSEARCH_TORCH="torch==2.13.0" (default)  the CPU build of torch; set MDSEARCH_TORCH=torch on a
#                                             Linux machine with an NVIDIA GPU for the CUDA build
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
# torch first: asked for through sentence-transformers, pip would pick a multi-GB CUDA build.
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  "${pip[@]}" install "${MDSEARCH_TORCH:-torch==2.13.0}"
fi
"${pip[@]}" install -e '.[test]'
echo "mdsearch is installed in .venv ($(.venv/bin/mdsearch --version))" >&2
