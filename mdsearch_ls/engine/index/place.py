"""Which folder holds an index, and which notes folder a command run somewhere means.

Apart from :mod:`.layout` (which re-exports these) because ``mdsearch search`` asks them before
anything else, to send its question to the server that holds the index before the rest of the
CLI is imported (``mdsearch_ls/cli/early.py``). So the rules work on strings with ``os.path``
and nothing else is imported at first: no settings (their dataclasses bring ``inspect``), no
``pathlib`` and ``re`` (12 ms together here, most of what that process would spend before it
asks), and no ``platformdirs`` where the rule it applies is the plain XDG one. The ``Path``
forms the rest of the engine uses are thin wrappers.
"""

from __future__ import annotations

import os
import sys

try:  # the builtin module: hashlib's import loads OpenSSL first (~3 ms), for the same digest
    from _sha1 import sha1 as _sha1
except ImportError:  # pragma: no cover  (a Python built without its own hashes)
    from hashlib import sha1 as _sha1

TYPE_CHECKING = False  # not typing's (see above)
if TYPE_CHECKING:
    from pathlib import Path

APP = "mdsearch"
_SLUG = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def cache_folder() -> str:
    """Base folder for indexes: ``$MDSEARCH_CACHE_DIR`` or the platform's user cache dir."""
    env = os.environ.get("MDSEARCH_CACHE_DIR")
    if env:
        return os.path.expanduser(env)
    plain = _xdg_cache_dir()
    if plain is not None:
        return plain
    import platformdirs

    return platformdirs.user_cache_dir(APP, appauthor=False)


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


def slug(name: str) -> str:
    """``name`` with each run of characters other than ``A-Za-z0-9._-`` as one ``-``, trimmed of
    ``-`` (``re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")``, without ``re``)."""
    out: list[str] = []
    replaced = False
    for ch in name:
        if ch in _SLUG:
            out.append(ch)
            replaced = False
        elif not replaced:
            out.append("-")
            replaced = True
    return "".join(out).strip("-")


def index_folder(root: str) -> str:
    """``<cache>/indexes/<folder name>-<hash of its path>``: readable and collision-free."""
    absolute = os.path.realpath(os.path.expanduser(root))
    name = slug(os.path.basename(absolute)) or "root"
    digest = _sha1(absolute.encode()).hexdigest()[:12]
    return os.path.join(cache_folder(), "indexes", f"{name[:40]}-{digest}")


def indexed_folder(start: str) -> str | None:
    """``start`` or its nearest parent that has an index in the default place (a folder with
    a ``*.sqlite3`` manifest), like git finds its repository; None when there is none."""
    here = os.path.realpath(os.path.expanduser(start))
    while True:
        try:
            if any(name.endswith(".sqlite3") for name in os.listdir(index_folder(here))):
                return here
        except OSError:  # no index folder (or not a folder)
            pass
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


# ---- the same as Paths, for the rest of the engine -----------------------------------------------


def cache_root() -> Path:
    from pathlib import Path

    return Path(cache_folder())


def default_index_dir(root: Path) -> Path:
    from pathlib import Path

    return Path(index_folder(os.fspath(root)))


def find_index_root(start: Path | str, index_dir: Path | str | None = None) -> Path | None:
    """The notes folder a command run in ``start`` means (:func:`indexed_folder`). With
    ``index_dir`` (an index kept elsewhere), the folder it was built from (its ``ROOT`` file),
    whatever ``start`` is. Reads only: nothing is created."""
    from pathlib import Path

    if index_dir is not None:
        try:
            recorded = (Path(index_dir).expanduser() / "ROOT").read_text("utf-8").strip()
        except OSError:
            return None
        root = Path(recorded)
        return root if recorded and root.is_dir() else None
    found = indexed_folder(os.fspath(start))
    return None if found is None else Path(found)
