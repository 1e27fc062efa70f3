"""``mdsearch install EXTRA``: an optional part of mdsearch, installed into the environment that
mdsearch runs in, whichever tool made it.

pipx, ``uv tool`` and a virtual environment each give mdsearch an environment of its own, and a
``pip install 'mdsearch-ls[formats]'`` typed at a prompt lands wherever the first ``pip`` on
PATH installs (or is refused, on a Python that PEP 668 marks as the system's). As ``llm install``
does, this runs the installer of the interpreter running mdsearch: its own pip (a pipx
environment has one, shared), else, in an environment uv made without pip, ``uv pip install
--python`` that interpreter. What it installs is the extra's requirements as the installed
mdsearch-ls's metadata lists them, so their versions are the ones this mdsearch was released
with, and mdsearch itself is left as it is (an editable install stays editable).

A ``uvx`` environment is uv's cache, rebuilt whenever uv likes: installing into it would not
last, so the extra is named on the uvx command line instead (``uvx --from``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from mdsearch_ls.cli.common import EXIT_ERROR, EXIT_OK, UsageError, _said

DIST = "mdsearch-ls"
EXTRAS = {
    "formats": "PDF, Word, HTML and Org documents beside the notes (include_formats; ~15 MB)",
    "multilingual": "the multilingual model (model = multilingual; ~33 MB, numpy only)",
    "torch": "the torch backend (embedder.backend = torch: a GPU, or another model)",
}
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def requirements(extra: str) -> list[str]:
    """The requirements the installed mdsearch-ls lists for ``extra`` (markers dropped)."""
    # Imported here, not at the top: importlib.metadata (and the email package it reads
    # metadata with) costs ~8 ms of CPU at import, in every command, for this one.
    import importlib.metadata

    try:
        listed = importlib.metadata.requires(DIST) or []
    except importlib.metadata.PackageNotFoundError:
        raise UsageError(f"{DIST} is not installed in {sys.prefix} (mdsearch runs from a "
                         "source folder): install it, or install the extra's packages "
                         "yourself") from None
    wanted = re.compile(r"""\bextra\s*==\s*["']""" + re.escape(extra) + """["']""")
    return [req.split(";")[0].strip() for req in listed if wanted.search(req.partition(";")[2])]


def installer() -> list[str]:
    """The command that installs into this interpreter's environment, before its arguments."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip", "install"]
    uv = os.environ.get("UV") or shutil.which("uv")  # uv sets UV in the processes it starts
    if uv:
        return [uv, "pip", "install", "--python", sys.executable]
    raise UsageError(f"the environment mdsearch runs in ({sys.prefix}) has no pip, and uv is "
                     "not on PATH: install uv, or add pip to it with "
                     f"{shlex.quote(sys.executable)} -m ensurepip")


def in_uvx() -> bool:
    """Whether this environment is one of ``uvx``'s (``uv tool run``): a folder of uv's cache."""
    return any(part.startswith("archive-v") for part in Path(sys.prefix).parts)


def commands(extras: list[str]) -> list[list[str]]:
    """The installer runs that install ``extras``, in order."""
    install = installer()
    runs = []
    if ("torch" in extras and sys.platform == "linux" and importlib.util.find_spec("torch") is None
            and shutil.which("nvidia-smi") is None):
        # Linux wheels of torch on PyPI are CUDA builds (GBs); without an NVIDIA GPU, the CPU one
        runs.append([*install, "torch", "--index-url", TORCH_CPU_INDEX])
    runs.append([*install, *[req for extra in extras for req in requirements(extra)]])
    return runs


def cmd_install(args: argparse.Namespace) -> int:
    extras = list(dict.fromkeys(args.extra))
    if in_uvx():
        spec = f"{DIST}[{','.join(extras)}]"
        raise UsageError("this mdsearch runs from uvx's cache, which uv rebuilds at will: name "
                         f"the extra on uvx's command line instead, uvx --from '{spec}' "
                         f"mdsearch-ls ... (or install mdsearch: uv tool install '{spec}')")
    for run in commands(extras):
        _said(f"installing {', '.join(extras)}: {shlex.join(run)}")
        done = subprocess.run(run, check=False)
        if done.returncode != 0:
            _said(f"the installer failed (exit {done.returncode})")
            return EXIT_ERROR
    _said(f"installed {', '.join(extras)} into {sys.prefix}")
    return EXIT_OK
