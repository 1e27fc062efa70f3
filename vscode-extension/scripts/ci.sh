#!/usr/bin/env bash
# CI for the VS Code extension, from a clean clone:
#   npm ci -> type check -> lint -> unit tests -> .vsix -> end-to-end test in code-server.
# Env: MDSEARCH_PYTHON  Python with mdsearch_ls installed (default ../.venv/bin/python, relative to
#                       the extension folder): its mdsearch serves the main end-to-end test;
#      MDSEARCH_WHEELHOUSE  folder of wheels (mdsearch-ls and every dependency) the install test
#                       installs from offline (default ../dist/wheelhouse, made by scripts/dist.sh);
#      CODE_SERVER_PREFIX (default /opt/mdsearch-code-server);
#      MDSEARCH_SKIP_E2E=1 skips the end-to-end tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ext_dir=$(pwd)

step() { printf '\n== %s (%ss)\n' "$1" "$SECONDS"; }

step "npm ci"
npm ci --no-audit --no-fund --loglevel=error

step "type check"
npx --no-install tsc --noEmit -p .

step "lint"
npx --no-install eslint .

step "unit tests"
npm run --silent compile-tests
node --test out/test/unit/

step "package"
rm -f mdsearch.vsix
npm run --silent package 2>&1 | tee "${TMPDIR:-/tmp}/mdsearch-vsce.log"
# vsce prints WARNING lines for problems it still packages (missing fields, large files in bundle)
if grep -q 'WARNING' "${TMPDIR:-/tmp}/mdsearch-vsce.log"; then echo "vsce reported warnings" >&2; exit 1; fi
test -s mdsearch.vsix

if [[ ${MDSEARCH_SKIP_E2E:-0} == 1 ]]; then
  echo "MDSEARCH_SKIP_E2E=1: end-to-end test skipped"
  exit 0
fi

step "end-to-end (code-server + Chromium)"
prefix=${CODE_SERVER_PREFIX:-/opt/mdsearch-code-server}
code_server=$prefix/node_modules/.bin/code-server
if [[ ! -x $code_server || ! -x /usr/bin/chromium ]]; then
  installer=$ext_dir/../../shared/tools/install-code-server  # ../shared beside the project
  [[ -f $installer ]] || { echo "install-code-server not found at $installer" >&2; exit 1; }
  echo "installing code-server into $prefix (one time, a few minutes)"
  # npm 11.19 runs a package's install scripts only when allowed (allowScripts); code-server's
  # postinstall builds its native modules, so an install without it cannot start. Older npm
  # ignores the setting.
  npm_config_dangerously_allow_all_scripts=true bash "$installer" "$prefix"
fi
python=${MDSEARCH_PYTHON:-../.venv/bin/python}
[[ $python == /* ]] || python=$ext_dir/$python
[[ -x $python ]] || { echo "no Python at $python (set MDSEARCH_PYTHON)" >&2; exit 1; }
[[ -x $(dirname "$python")/mdsearch ]] || { echo "no mdsearch beside $python" >&2; exit 1; }
wheelhouse=${MDSEARCH_WHEELHOUSE:-$ext_dir/../dist/wheelhouse}
[[ $wheelhouse == /* ]] || wheelhouse=$ext_dir/$wheelhouse
compgen -G "$wheelhouse/mdsearch_ls-*.whl" >/dev/null \
  || { echo "no mdsearch_ls wheel in $wheelhouse (run scripts/dist.sh, or set MDSEARCH_WHEELHOUSE)" >&2; exit 1; }
rm -rf test-results
CODE_SERVER=$code_server MDSEARCH_PYTHON=$python MDSEARCH_WHEELHOUSE=$wheelhouse \
  node --test --test-concurrency=1 out/test/e2e/
step "done"
