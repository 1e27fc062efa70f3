#!/usr/bin/env bash
# Builds every release artifact into dist/, as the release workflows (.github/workflows/) do:
#   mdsearch_ls-V-py3-none-any.whl, mdsearch_ls-V.tar.gz   the package (python -m build)
#   mdsearch_model_minilm-1.0.0-py3-none-any.whl           the model's files (build_model_wheel.py)
#   mdsearch-V.vsix                                         the VS Code extension (vsce)
#   obsidian/main.js, manifest.json, styles.css             the Obsidian plugin's release assets
#   mdsearch-obsidian-V.zip                                 the same in a folder named by the id
#   wheelhouse/                                             both wheels and a wheel of every
#       dependency (the extras formats and multilingual included) for this Python, and pip, so
#       installs can be tried offline: pip install --no-index --find-links dist/wheelhouse ...
# Needs .venv (scripts/setup.sh) with build (mdsearch-ls[test]; installed here if missing), Node
# and npm; PyPI and npm for the build tools and dependencies.
#   scripts/dist.sh [python] [vscode] [obsidian]   only those parts (default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."
parts=" ${*:-python vscode obsidian} "
for part in $parts; do
  [[ $part == @(python|vscode|obsidian) ]] || { echo "unknown part: $part" >&2; exit 2; }
done
python=$PWD/.venv/bin/python
[[ -x $python ]] || { echo "no .venv: run scripts/setup.sh first" >&2; exit 1; }
pip=("$python" -m pip --disable-pip-version-check -q)
constraints=()
if [[ -z ${MDSEARCH_UNPINNED:-} ]] && "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  constraints=(-c scripts/constraints-py311.txt)
fi
"$python" -c "import build" 2>/dev/null || "${pip[@]}" install build "${constraints[@]}"
step() { printf '::: dist: %s (%ss)\n' "$1" "$SECONDS" >&2; }

if [[ $parts == *" python "* ]]; then
  rm -rf dist/wheelhouse dist/mdsearch_ls-*
  step "the model's wheel"
  "$python" scripts/build_model_wheel.py --out dist >/dev/null
  step "the package's sdist and wheel (the wheel built from the sdist)"
  "$python" -m build --quiet --outdir dist . >/dev/null
  version=$("$python" -c 'import mdsearch_ls; print(mdsearch_ls.__version__)')
  wheel=dist/mdsearch_ls-$version-py3-none-any.whl
  [[ -f $wheel && -f dist/mdsearch_ls-$version.tar.gz ]] || { echo "no $wheel" >&2; exit 1; }

  # pip too: pipx brings the pip of its shared environment up to date from the same place
  step "the wheelhouse (every dependency as a wheel, for this Python, and pip)"
  "${pip[@]}" wheel --find-links dist -w dist/wheelhouse "${constraints[@]}" \
    "$wheel[formats,multilingual]" pip
fi

# npm ci unless node_modules is already what package-lock.json says (npm ci wipes and reinstalls
# it, and scripts/test.sh has just done so for the extensions' tests)
npm_ci() { [[ node_modules/.package-lock.json -nt package-lock.json ]] \
  || npm ci --no-audit --no-fund --loglevel=error; }
if [[ $parts == *" vscode "* ]]; then
  step "the VS Code extension (.vsix)"
  rm -f dist/*.vsix
  (cd vscode-extension && npm_ci && rm -f ./*.vsix && npm run --silent package >/dev/null)
  ext_version=$(node -p 'require("./vscode-extension/package.json").version')
  cp vscode-extension/*.vsix "dist/mdsearch-$ext_version.vsix"
fi
if [[ $parts == *" obsidian "* ]]; then
  step "the Obsidian plugin (main.js, manifest.json, styles.css, and a zip of them)"
  rm -rf dist/obsidian dist/mdsearch-obsidian-*.zip
  (cd obsidian-plugin && npm_ci && npm run --silent build)
  plugin_id=$(node -p 'require("./obsidian-plugin/manifest.json").id')
  plugin_version=$(node -p 'require("./obsidian-plugin/manifest.json").version')
  mkdir -p "dist/obsidian/$plugin_id"
  cp obsidian-plugin/main.js obsidian-plugin/manifest.json obsidian-plugin/styles.css \
    "dist/obsidian/$plugin_id/"
  (cd dist/obsidian && "$python" -m zipfile -c "../mdsearch-obsidian-$plugin_version.zip" \
    "$plugin_id")
  mv "dist/obsidian/$plugin_id"/* dist/obsidian/ && rmdir "dist/obsidian/$plugin_id"
fi
step "done"
(cd dist && ls -l -- *.whl *.tar.gz *.vsix *.zip obsidian/* 2>/dev/null | awk '{printf "%12s  %s\n", $5, $NF}' >&2) || true
