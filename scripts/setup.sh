#!/usr/bin/env bash
# Sets up .venv with mdsearch and its test tools. Safe to re-run: it only installs what is missing.
#   MDSEARCH_TORCH="torch==2.13.0" (default)  the CPU build of torch; set MDSEARCH_TORCH=torch on a
#                                             Linux machine with an NVIDIA GPU for the CUDA build
#   MDSEARCH_UNPINNED=1                       newest dependency versions instead of the tested set
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
# On Python 3.11 the versions CI tested (scripts/constraints-py311.txt), so a new release of a
# dependency cannot change a fresh install under us; MDSEARCH_UNPINNED=1 takes the newest instead.
constraints=()
if [[ -z ${MDSEARCH_UNPINNED:-} ]] && .venv/bin/python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  constraints=(-c scripts/constraints-py311.txt)
fi
"${pip[@]}" install -e '.[test]' "${constraints[@]}"
echo "mdsearch is installed in .venv ($(.venv/bin/mdsearch --version))" >&2
