"""Opening the right index for a command: which folder it means (``--root``, else the nearest
indexed folder, as git finds its repository), the confirmation before a first index of a huge
folder, and a session that opens the workspace and brings it up to date with progress and
signals."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mdsearch_ls.cli.common import EXIT_OK, EXIT_SIGINT, UsageError, _note, _said, _shown, log
from mdsearch_ls.config import Settings


def _find_root(args: argparse.Namespace, settings: Settings, start: Path | None = None) -> Path:
    """``--root``, else the nearest folder at or above ``start`` (default: the current one)
    with an index, else a usage error saying how to make one. Never creates anything."""
    from mdsearch_ls.engine.api import find_index_root

    if args.root is not None:
        return Path(args.root)
    here = (start or Path.cwd()).resolve()
    found = find_index_root(here, settings.index_dir)
    if found is not None:
        return found
    if settings.index_dir:
        raise UsageError(f"no index in {settings.index_dir}: run `mdsearch index DIR "
                         f"--index-dir {settings.index_dir}` (or give --root)")
    raise UsageError(f"no index for {here} or any parent: run `mdsearch index DIR` "
                     f"(or give --root)")


def _confirm_first_index(args: argparse.Namespace, root: Path, settings: Settings) -> None:
    """Before the first index of ``root``: a home folder, ``/`` or more than ``max_files`` notes
    needs ``--yes``, and the refusal names the count (an hour of embedding, or a crawl of
    site-packages READMEs, is not what a typo should cost)."""
    from mdsearch_ls.engine.api import broad_root_reason, has_index

    if getattr(args, "yes", False) or not root.is_dir() or has_index(root, settings):
        return
    found = broad_root_reason(root, settings, "--max-files")
    if found is None:
        return
    reason, special = found
    if not special:
        raise UsageError(f"{reason}; pass --yes to index it anyway, or --max-files N")
    raise UsageError(f"{reason}; index the folder that holds your notes, or pass --yes to "
                     f"index it anyway")


READ = object()
"""``stored`` not known yet: read it from the index's manifest."""


def with_remembered_formats(args: argparse.Namespace, settings: Settings, root: Path,
                            stored: Any = READ) -> Settings:
    """Without ``--include-formats``, the formats the index was last built with: a search must
    not drop the PDFs that ``mdsearch index --include-formats pdf`` put in, as a note that no
    longer matches would be dropped (``--include-formats none`` turns them off).

    ``stored``: those formats as already known (a server that holds the index sends them with
    its answer), so the manifest need not be opened here (SQLite's import alone is ~5 ms of a
    search the server answers); by default read from the manifest."""
    if getattr(args, "include_formats", None) is not None:
        return settings
    if stored is READ:
        from mdsearch_ls.engine.api import index_formats

        stored = index_formats(root, settings)
    if stored and tuple(stored) != settings.include_formats:
        return dataclasses.replace(settings, include_formats=tuple(stored))
    return settings


TARGETED_MAX = 200
"""Changed notes a search updates one by one (no second scan of the folder, no read of every
note's record: a one-note update at 96k notes); more go through a full, cancellable index."""


class _Session:
    """What one command run shares: the progress line, the model (wrapped to report), signals."""

    def __init__(self, args: argparse.Namespace, settings: Settings) -> None:
        # here, not at the top: a search a server answers needs no progress line (signal, shutil)
        from mdsearch_ls.cli.progress import _Progress, _ReportingEmbedder
        from mdsearch_ls.engine.api import create_embedder

        self.args = args
        self.settings = settings
        self.progress = _Progress(not args.quiet)
        self.embedder = _ReportingEmbedder(create_embedder(settings), self.progress)
        self.changed: list[str] | None = None
        """The notes a read-only look found changed: what the update that follows reads."""
        self.warm: Callable[[Any, Callable[[], bool]], None] | None = None
        """What the command does with the read-only workspace while the look's walk runs (and
        a way to ask whether it still does)."""

    def open(self, root: Path, mode: str) -> Any:
        """The workspace of ``root``, opened as the command needs it (see ``OpenMode``).

        A command that would update first (``read-if-locked``) looks before it leaps: when a
        read-only open finds nothing changed since the last index, it searches that, without the
        writer lock or Chroma (whose import alone costs seconds), and the index is as fresh as an
        update would have made it.
        """
        from mdsearch_ls.engine.api import (
            VectorServerError,
            Workspace,
            ask_to_leave,
            has_index,
            index_dir_of,
        )

        self.settings = with_remembered_formats(self.args, self.settings, root)
        if mode == "read-if-locked" and has_index(root, self.settings):
            ws = self._look(root)
            if ws is not None:
                return ws
        # A background process holding the index (one whose socket would not answer this
        # command: other settings, another version) gives it up rather than stand in the way.
        if (mode != "read" and has_index(root, self.settings)
                and ask_to_leave(index_dir_of(root, self.settings))):
            log.info("the background process holding the index of %s gave it over", root)
        # A few saved notes are written without Chroma (its import and graph cost more than
        # the rest of the search); the next writer that opens it catches it up.
        try:
            ws = Workspace.open(root, self.settings, mode,  # type: ignore[arg-type]
                                embedder=self.embedder, defer_vectors=self._few_changed())
        except VectorServerError as exc:
            # A search need not update first: the index as it is needs no Chroma at all.
            if mode != "read-if-locked" or not has_index(root, self.settings):
                raise
            ws = Workspace.open(root, self.settings, "read", embedder=self.embedder)
            ws.read_only_reason = f"{exc}; searching the index as it is, without updating it"
        if ws.read_only_reason:
            _note(self.args, ws.read_only_reason)
        if ws.healed:
            _note(self.args, ws.healed)
        if ws.switched:
            _note(self.args, ws.switched)
        return ws

    def _look(self, root: Path) -> Any | None:
        """The index opened read-only when it is up to date, else None (``changed`` says what
        changed). The walk runs beside this process (``WalkBeside``) while this one does what
        it can ahead (``warm``): with nothing holding the index, a search's model load and
        ranking waited 0.55 s at 89k notes behind a walk that left the second core idle."""
        from mdsearch_ls.engine.api import (
            IndexOpenError,
            NotIndexedError,
            WalkBeside,
            Workspace,
            index_dir_of,
        )

        # (started first: the walk is the longer of the two)
        walk = WalkBeside(root, self.settings, index_dir_of(root, self.settings))
        try:
            try:
                ws = Workspace.open(root, self.settings, "read", embedder=self.embedder)
            except (IndexOpenError, NotIndexedError):  # damaged or emptied: the writer heals
                return None
            try:
                ready = ws.index_state().state == "ready"
                if ready and self.warm is not None and walk.pid is not None:
                    try:
                        self.warm(ws, walk.walking)
                    except Exception as exc:  # (the command meets it again, and says it)
                        log.debug("working ahead failed: %s", exc)
                self.changed = ws.changed_notes(seen=walk.seen) if ready else None
            except IndexOpenError:  # damage a read met: the writer's open heals it
                self.changed = None
            except BaseException:
                ws.close()
                raise
            if self.changed == []:
                log.info("the index of %s is up to date: searching it as it is", root)
                return ws
            ws.close()
            return None
        finally:
            walk.cancel()

    def nothing_to_index(self, root: Path) -> Any | None:
        """The report of an index run that would change nothing, made from a read-only look
        (``Workspace.up_to_date``), or None when there is something to do: a no-op ``index``
        then takes no writer lock and imports no Chroma (a second of a 96k-chunk run)."""
        from mdsearch_ls.engine.api import (
            IndexOpenError,
            IndexReport,
            NotIndexedError,
            WalkBeside,
            Workspace,
            has_index,
            index_dir_of,
        )

        t0 = time.perf_counter()
        self.settings = with_remembered_formats(self.args, self.settings, root)
        if not has_index(root, self.settings):
            return None
        # (the manifest is read here while the notes are walked beside: see _look)
        walk = WalkBeside(root, self.settings, index_dir_of(root, self.settings))
        try:
            with Workspace.open(root, self.settings, "read", embedder=self.embedder) as ws:
                if not ws.up_to_date(seen=walk.seen):
                    return None
                status = ws.status()
        except (IndexOpenError, NotIndexedError):  # damage: the writer's open heals it
            return None
        finally:
            walk.cancel()
        files, chunks = int(status["files"]), int(status["chunks"])
        return IndexReport(files_total=files, files_unchanged=files, chunks_total=chunks,
                           seconds=time.perf_counter() - t0)

    def _few_changed(self) -> bool:
        """Whether the read-only look found a few changed notes: updated one by one, and
        without Chroma."""
        return bool(self.changed) and len(self.changed or ()) <= TARGETED_MAX

    def update(self, ws: Any, *, rebuild: bool = False, first: bool = False) -> tuple[Any, int]:
        """Bring the index up to date with a truthful progress line; ``(report, exit code)``,
        the code non-zero when a signal stopped the run (what was committed is said)."""
        args = self.args
        if first:
            _note(args, f"{ws.root} is not indexed yet: indexing it first (once; later runs "
                  f"only read changed notes)")
        # The notes the read-only look found changed are all an update reads, unless the
        # writer's open found more to do (it healed damage or switched models) or there are
        # too many to go without a progress line.
        from mdsearch_ls.cli.progress import _Signals

        targeted = (self._few_changed() and not rebuild and not first
                    and not ws.healed and not ws.switched and not ws.repaired)
        changed, self.changed = self.changed or [], None
        self.progress.phase(f"scanning {_shown(ws.root)}…")
        report = None
        with _Signals(self.progress) as signals:
            try:
                if targeted:
                    report = ws.update(changed)
                    report.files_total = int(ws.status()["files"])
                else:
                    report = ws.index(progress=self.progress.files, cancel=signals.cancelled,
                                      rebuild=rebuild)
            except KeyboardInterrupt:
                self.progress.clear()
                files = _committed_files(ws)
                _said(f"interrupted: {files} notes are in the index; run `mdsearch index "
                      f"{_shown(ws.root)}` to finish")
                return None, signals.exit_code if signals.received else EXIT_SIGINT
            finally:
                self.progress.clear()
        if not args.quiet:
            for warning in report.warnings:
                print(f"mdsearch: warning: {warning}", file=sys.stderr)
        if report.cancelled:
            have = report.files_unchanged + report.files_indexed
            _said(f"interrupted: {have} of {report.files_total} notes are in the index "
                  f"({report.files_indexed} indexed by this run, {report.chunks_written} chunks "
                  f"committed); run `mdsearch index {_shown(ws.root)}` to finish")
            return report, signals.exit_code
        return report, EXIT_OK


def _committed_files(ws: Any) -> int | str:
    try:
        return int(ws.status()["files"])
    except Exception:  # the run died mid-write; the next open repairs it
        return "the committed"
