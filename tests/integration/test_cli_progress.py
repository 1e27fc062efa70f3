"""The progress line of a first index in a real terminal (tmux), and what Ctrl-C / SIGTERM in the
middle of it leave behind: "loading model" while the model loads, a bar whose chunk count moves
per embedded batch, a summary line; a stop that says how many notes were committed, which the
index then holds, and a next run that finishes the rest."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.conftest import run_cli

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None,
                       reason="tmux is not installed (apt-get install -y tmux)"),
]

NOTES = 70  # more than one committed batch
SECTIONS = 6  # long sections: the run lasts seconds even on a fast machine, so a stop lands mid-run
BAR = re.compile(r"indexing [█░]+ (\d+)/(\d+) notes · (\d+) chunks embedded · \d+:\d\d")
STOPPED = re.compile(r"interrupted: (\d+) of (\d+) notes are in the index")


def _vault(root: Path, sections: int = SECTIONS) -> Path:
    topics = ["sourdough", "kilns", "ferns", "tides", "orchards", "lanterns", "glaciers"]
    words = (
        "measured", "observed", "changed", "slowly", "after", "rain", "before", "dawn", "with",
        "care", "the", "water", "level", "rose", "while", "the", "light", "faded", "and", "a",
        "note", "was", "kept", "of", "each", "step", "taken",
    )
    for i in range(NOTES):
        topic = topics[i % len(topics)]
        path = root / f"{topic}-{i:02d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        parts = []
        for j in range(sections):
            # About 150 words each, different per note and section: every chunk is embedded.
            body = " ".join(words[(i * 7 + j * 3 + k) % len(words)] for k in range(150))
            parts.append(f"## Day {j} of {topic} {i}\n\nObservation {i}.{j}: {body}.\n")
        path.write_text(f"# {topic.title()} note {i}\n\n" + "\n".join(parts), "utf-8")
    return root


READY = "mdsearch-test-terminal-ready"


class Terminal:
    """A command in a detached tmux session, 160x30, and what its screen showed over time."""

    def __init__(self, command: str, tmp: Path) -> None:
        self.name = f"mdsearch-{uuid.uuid4().hex[:8]}"
        self.pid_file = tmp / f"{self.name}.pid"
        # The inner shell writes its pid and becomes mdsearch (exec), so the pid is mdsearch's;
        # the outer shell reports the exit code and keeps the pane open to read it.
        inner = f"echo $$ > {shlex.quote(str(self.pid_file))}; exec {command}"
        # mdsearch starts only once the pane is seen drawing ("ready", then Enter): on a tmux
        # server that has just started, a capture can show a blank pane for seconds, and a first
        # index on a fast run is over by then (seen in CI: only the summary was ever captured).
        outer = (f"echo {READY}; read -r _; bash -c {shlex.quote(inner)}; echo EXIT=$?; "
                 "exec sleep 3600")
        subprocess.run(["tmux", "new-session", "-d", "-s", self.name, "-x", "160", "-y", "30",
                        "bash", "-c", outer], check=True)
        # Everything written to the pane, as written: a line drawn and redrawn within one poll
        # of the screen (the model loads in a fraction of a second) is still in it.
        self.output = tmp / f"{self.name}.out"
        subprocess.run(["tmux", "pipe-pane", "-o", "-t", self.name,
                        f"cat >> {shlex.quote(str(self.output))}"], check=True)
        self.seen: list[str] = []
        self.wait_for(lambda s: READY in s, 60, "the terminal to be ready")
        subprocess.run(["tmux", "send-keys", "-t", self.name, "Enter"], check=True)

    def screen(self) -> list[str]:
        out = subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name],
                             capture_output=True, text=True, check=True).stdout
        lines = [line.rstrip() for line in out.splitlines() if line.strip()]
        for line in lines:
            if not self.seen or self.seen[-1] != line:
                self.seen.append(line)
        return lines

    def wait_for(self, ok: Callable[[list[str]], bool], timeout: float, what: str) -> list[str]:
        """Poll the screen until ``ok`` holds (a condition, not a fixed sleep)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = self.screen()
            if ok(lines):
                return lines
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; screen showed:\n"
                             + "\n".join(self.seen[-40:]))

    def wait_for_output(self, text: str, timeout: float, what: str) -> None:
        """Poll what was written to the pane until ``text`` is in it (a condition, not a fixed
        sleep)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.output.exists() and text in self.output.read_bytes().decode("utf-8", "replace"):
                return
            self.screen()
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; screen showed:\n"
                             + "\n".join(self.seen[-40:]))

    @property
    def pid(self) -> int:
        return int(self.pid_file.read_text().strip())

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def _bars(lines: list[str]) -> list[tuple[int, int, int]]:
    return [tuple(int(g) for g in m.groups()) for line in lines  # type: ignore[misc]
            if (m := BAR.search(line))]


def _exit_code(lines: list[str]) -> int | None:
    for line in lines:
        if line.startswith("EXIT="):
            return int(line.removeprefix("EXIT="))
    return None


def _command(vault: Path, cache: Path) -> str:
    env = f"MDSEARCH_CACHE_DIR={shlex.quote(str(cache))} COLUMNS=160"
    return f"env {env} {shlex.quote(sys.executable)} -m mdsearch_ls index {shlex.quote(str(vault))}"


def _mid_run(term: Terminal) -> Callable[[list[str]], bool]:
    """Some notes committed, not all, and the chunk count seen moving: a stop now lands mid-run
    (the run lasts many batches of about a second each, see SECTIONS)."""
    def ok(_lines: list[str]) -> bool:
        bars = _bars(term.seen)
        moving = len({c for _d, _t, c in bars}) >= 2
        return moving and any(0 < done < total for done, total, _c in bars)
    return ok


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_first_index_progress_and_a_stop_that_keeps_what_was_committed(
    tmp_path: Path, how: str
) -> None:
    vault = _vault(tmp_path / "vault")
    cache = tmp_path / "cache"
    term = Terminal(_command(vault, cache), tmp_path)
    try:
        term.wait_for_output("loading model all-MiniLM-L6-v2…", 240, "the model-loading line")
        term.wait_for(_mid_run(term), 300, "some notes committed and the chunk count moving")
        if how == "ctrl-c":
            subprocess.run(["tmux", "send-keys", "-t", term.name, "C-c"], check=True)
        else:
            os.kill(term.pid, signal.SIGTERM)
        lines = term.wait_for(lambda s: _exit_code(s) is not None, 300, "mdsearch to exit")
        assert _exit_code(lines) == (130 if how == "ctrl-c" else 143)
        said = "\n".join(term.seen)
        name = "Ctrl-C" if how == "ctrl-c" else "SIGTERM"
        assert f"mdsearch: {name}: stopping after the current batch" in said
        stopped = STOPPED.search(said)
        assert stopped, said
        committed, total = int(stopped.group(1)), int(stopped.group(2))
        assert total == NOTES and 0 < committed < NOTES
        # The bar counted notes out of the right total and the chunk count moved.
        bars = _bars(term.seen)
        assert all(t == NOTES for _d, t, _c in bars)
        assert len({c for _d, _t, c in bars}) >= 2
    finally:
        term.close()
    # What the message said is what the index holds, and it knows it was cut short.
    status = json.loads(run_cli("status", "--root", str(vault), "--json", cache=cache).stdout)
    assert status["files"] == committed
    assert status["index"]["state"] == "interrupted"
    # The next run finishes the rest and ends with a summary line.
    rest = run_cli("index", str(vault), cache=cache)
    assert rest.returncode == 0, rest.stderr
    assert re.search(rf"indexed .*: {NOTES} files, \d+ chunks, {NOTES - committed} indexed",
                     rest.stdout), rest.stdout


def test_an_up_to_date_index_shows_no_bar_and_a_summary(tmp_path: Path) -> None:
    """A second run has nothing to embed: no model load, no bar flashing by, one summary."""
    vault = _vault(tmp_path / "vault", sections=1)
    cache = tmp_path / "cache"
    first = run_cli("index", str(vault), cache=cache)
    assert first.returncode == 0, first.stderr
    term = Terminal(_command(vault, cache), tmp_path)
    try:
        lines = term.wait_for(lambda s: _exit_code(s) is not None, 120, "mdsearch to exit")
        assert _exit_code(lines) == 0
        assert any(re.match(rf"indexed .*: {NOTES} files, .* 0 indexed", x) for x in lines)
        assert not any("loading model" in x or BAR.search(x) for x in term.seen), term.seen
    finally:
        term.close()
