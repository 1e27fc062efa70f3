"""Which folder holds an index, and which notes folder a command run somewhere means.

Apart from :mod:`.layout` (which re-exports these) because ``mdsearch search`` asks them before
anything else, to send its question to the server that holds the index while the rest of the CLI
is still being imported (``mdsearch_ls/cli/early.py``): standard library only, no settings
(their dataclasses bring ``inspect``: ~10 ms) and no ``platformdirs`` where the rule it applies
is the plain XDG one (its import brings ``tempfile``, ``shutil`` and ``random``: ~5 ms).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

try:  # the builtin module: hashlib's import loads OpenSSL first (~3 ms), for the same digest
    from _sha1 import sha1 as _sha1
except ImportError:  # pragma: no cover  (a Python built without its own hashes)
    from hashlib import sha1 as _sha1

APP = "mdsearch"


def cache_root() -> Path:
    """Base folder for indexes: ``$MDSEARCH_CACHE_DIR`` or the platform's user cache dir."""
    env = os.environ.get("MDSEARCH_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    plain = _xdg_cache_dir()
    if plain is not None:
        return Path(plain)
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP, appauthor=False))


def _xdg_cache_dir() -> str | None:
    """``platformdirs.user_cache_dir("mdsearch")`` on Linux when nothing about it is unusual
    (``$XDG_CACHE_HOME`` absolute or unset, ``$HOME`` absolute, not Android): the XDG rule every
    version of it applies there. None otherwise (a relative ``$XDG_CACHE_HOME`` was taken as is
    by older versions and is ignored by newer ones), and platformdirs decides
    (``tests/unit/test_place.py`` holds the two to the same answers)."""
    if not sys.platform.startswith("linux") or "ANDROID_DATA" in os.environ:
        return None
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg.startswith("/"):
        return os.path.join(xdg, APP)
    if xdg:
        return None
    home = os.environ.get("HOME", "")
    if not home.startswith("/"):
        return None
    return os.path.join(home.rstrip("/") + "/.cache", APP)


def default_index_dir(root: Path) -> Path:
    """``<cache>/indexes/<folder name>-<hash of its path>``: readable and collision-free."""
    absolute = root.expanduser().resolve()
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", absolute.name).strip("-") or "root"
    digest = _sha1(str(absolute).encode()).hexdigest()[:12]
    return cache_root() / "indexes" / f"{slug[:40]}-{digest}"


def find_index_root(start: Path | str, index_dir: Path | str | None = None) -> Path | None:
    """The notes folder a command run in ``start`` means: ``start`` or its nearest parent that has
    an index (in the default place), like git finds its repository; None when there is none.

    With ``index_dir`` (an index kept elsewhere), the folder it was built from (its ``ROOT``
    file), whatever ``start`` is. Reads only: nothing is created.
    """
    if index_dir is not None:
        try:
            recorded = (Path(index_dir).expanduser() / "ROOT").read_text("utf-8").strip()
        except OSError:
            return None
        root = Path(recorded)
        return root if recorded and root.is_dir() else None
    here = Path(start).expanduser().resolve()
    for folder in (here, *here.parents):
        candidate = default_index_dir(folder)
        if candidate.is_dir() and any(candidate.glob("*.sqlite3")):
            return folder
    return None
