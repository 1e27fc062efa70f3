"""What ``mdsearch`` prints and how a person or a script uses it: formats, colour, snippets, line
numbers, batches, ``--open``, help and typos. Real processes on an index built with the real
model; keyword mode where ranking is not the point (no model load, so these stay quick)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import IndexedVault, run_cli

pytestmark = pytest.mark.slow

ANSI = re.compile(r"\x1b\[[0-9;]*m")
KW = ("--mode", "keyword", "--no-update")
BACKUP = "operations/Backup and disaster recovery.md"


def _json(res: subprocess.CompletedProcess[str]) -> dict:
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


# ---- formats ------------------------------------------------------------------------------


def test_every_format_names_the_same_hits(indexed_vault: IndexedVault) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    q = ("search", "backup restore", *KW, "-k", "4")
    hits = _json(run_cli(*q, "--format", "json", cache=cache, cwd=vault))["results"]
    assert len(hits) == 4
    assert _json(run_cli(*q, "--json", cache=cache, cwd=vault))["results"] == hits

    jsonl = run_cli(*q, "--format", "jsonl", cache=cache, cwd=vault)
    rows = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert [r["rank"] for r in rows] == [1, 2, 3, 4]
    assert all(r["query"] == "backup restore" for r in rows)
    assert [{k: v for k, v in r.items() if k not in ("query", "rank")} for r in rows] == hits

    vimgrep = run_cli(*q, "--format", "vimgrep", cache=cache, cwd=vault).stdout.splitlines()
    assert len(vimgrep) == 4
    for line, hit in zip(vimgrep, hits, strict=True):
        path, lnum, col, text = line.split(":", 3)
        assert (path, int(lnum), col) == (hit["path"], hit["line"], "1")
        assert text.startswith(hit["breadcrumb"] + ": ")

    paths = run_cli(*q, "--format", "paths", cache=cache, cwd=vault).stdout.splitlines()
    assert paths == list(dict.fromkeys(h["path"] for h in hits))  # each note once, in rank order
    assert run_cli(*q, "-l", cache=cache, cwd=vault).stdout.splitlines() == paths
    # From another folder every format names files that open from there.
    elsewhere = run_cli(*q, "--root", str(vault), "-l", cache=cache, cwd=vault.parent)
    assert elsewhere.stdout.splitlines() == [f"vault/{p}" for p in paths]


def test_keyword_hits_show_their_bm25_rank_never_a_similarity(
    indexed_vault: IndexedVault,
) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    text = run_cli("search", "restic key", *KW, "-k", "3", cache=cache, cwd=vault)
    assert text.returncode == 0, text.stderr
    heads = [line for line in text.stdout.splitlines() if re.match(r"\s*\d+\. ", line)]
    assert len(heads) == 3
    assert all(re.search(r"\(lines \d+-\d+, BM25 rank (\d+|-)\)$", h) for h in heads), heads
    assert "similarity" not in text.stdout
    hits = _json(run_cli("search", "restic key", *KW, "-k", "3", "--json", cache=cache,
                         cwd=vault))["results"]
    assert all(h["score"] is None for h in hits)
    assert hits[0]["keyword_rank"] == 1


def test_snippets_are_plain_text_cut_between_words(indexed_vault: IndexedVault) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    res = run_cli("search", "travel taxis train", *KW, "-k", "5", cache=cache, cwd=vault,
                  env={"COLUMNS": "60"})
    assert res.returncode == 0, res.stderr
    blocks = re.split(r"(?m)^\s*\d+\. ", res.stdout)[1:]
    assert len(blocks) == 5
    for block in blocks:
        _head, _crumb, *snippet = block.rstrip("\n").split("\n")
        assert 1 <= len(snippet) <= 2, block  # one or two lines at the terminal's width
        for line in snippet:
            assert len(line) <= 60 and line.startswith("    "), line
            assert "**" not in line and "`" not in line
        last = snippet[-1]
        if last.endswith("…"):  # the cut fell between two words
            assert last[-2] != " "
    # The travel bullet is **bold** in the note and read as plain words here.
    assert "Travel to clients: second-class train" in res.stdout
    # A section that is only a code block reads as the block's first line.
    code = run_cli("search", "pgbackrest stanza", *KW, "-k", "1", cache=cache, cwd=vault)
    assert code.stdout.splitlines()[2].strip() == (
        "# Restore into a NEW cluster, never over production."
    )


def test_colour_on_a_terminal_only(indexed_vault: IndexedVault) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    q = ("search", "restic key", *KW, "-k", "2")
    piped = run_cli(*q, cache=cache, cwd=vault)
    assert piped.returncode == 0 and not ANSI.search(piped.stdout)
    forced = run_cli(*q, "--color", "always", cache=cache, cwd=vault).stdout
    assert "\x1b[35m" + BACKUP + "\x1b[0m" in forced  # path
    assert re.search(r"\x1b\[1;31m(restic|key)\x1b\[0m", forced)  # the query's words
    assert ANSI.sub("", forced) == piped.stdout  # colour adds nothing else

    tty = _on_a_terminal(q, cache, vault, {})
    assert "\x1b[35m" in tty and "\x1b[32m" in tty and "\x1b[1;31m" in tty
    assert not ANSI.search(_on_a_terminal(q, cache, vault, {"NO_COLOR": "1"}))


def _on_a_terminal(args: tuple[str, ...], cache: Path, cwd: Path, env: dict[str, str]) -> str:
    """Run with stdout on a pseudo-terminal, as in a shell; return what it printed."""
    master, slave = pty.openpty()
    full = {**os.environ, "MDSEARCH_CACHE_DIR": str(cache), "COLUMNS": "100", **env}
    if "NO_COLOR" not in env:
        full.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "mdsearch_ls", *args], stdout=slave,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, cwd=cwd,
                            env=full)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            raise AssertionError("no output from mdsearch on the terminal")
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0
    return out.decode("utf-8")


# ---- line numbers --------------------------------------------------------------------------


def test_line_numbers_round_trip_between_search_and_related(indexed_vault: IndexedVault) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    hits = _json(run_cli("search", "restore procedures database", *KW, "-k", "5", "--json",
                         cache=cache, cwd=vault))["results"]
    text = run_cli("search", "restore procedures database", *KW, "-k", "5", cache=cache,
                   cwd=vault).stdout
    shown = re.findall(r"(?m)^\s*\d+\. (.+?):(\d+)  ", text)
    assert shown == [(h["path"], str(h["line"])) for h in hits]
    for hit in hits[:3]:
        # The number a person reads is the number they type.
        rel = _json(run_cli("related", hit["path"], "--line", str(hit["line"]), "--json",
                            cache=cache, cwd=vault))
        assert rel["section"] == hit["title"], (hit, rel)
        assert rel["line"] == hit["line"]
    # And the section's own first line is where `related` says it starts.
    first = hits[0]
    lines = (vault / first["path"]).read_text("utf-8").splitlines()
    related_text = run_cli("related", first["path"], "--line", str(first["line"]), cache=cache,
                           cwd=vault).stdout.splitlines()[0]
    m = re.match(r"related to (.+?):(\d+) ", related_text)
    assert m and m.group(1) == first["path"]
    assert lines[int(m.group(2)) - 1].lstrip("#").strip() == first["title"]
    zero = run_cli("related", first["path"], "--line", "0", cache=cache, cwd=vault)
    assert zero.returncode == 2 and "1-based" in zero.stderr


# ---- batches -----------------------------------------------------------------------------------


def test_a_batch_with_bad_lines_answers_every_other_line(
    indexed_vault: IndexedVault, tmp_path: Path
) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    lines = ["restic key", "modified:yesterday invoices", '{"query": 5}', "{not json",
             json.dumps({"query": "expense policy"}), "token budgets"]
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(lines) + "\n", "utf-8")
    res = run_cli("search", "--queries", str(queries), *KW, "-k", "2", "--json", cache=cache,
                  cwd=vault)
    assert res.returncode == 2  # some line failed
    objs = [json.loads(line) for line in res.stdout.splitlines()]
    assert [o["query"] for o in objs] == ["restic key", "modified:yesterday invoices",
                                         '{"query": 5}', "{not json", "expense policy",
                                         "token budgets"]
    answered = [o for o in objs if "results" in o]
    failed = [o for o in objs if "error" in o]
    assert len(answered) == 3 and all(o["results"] for o in answered)
    assert len(failed) == 3 and all(set(o) == {"query", "error"} for o in failed)
    assert "expected a date" in failed[0]["error"]
    assert f"{queries}:3:" in failed[1]["error"] and f"{queries}:4:" in failed[2]["error"]

    # The same batch from stdin in text: answers on stdout, each failure on stderr.
    text = run_cli("search", "--queries", "-", *KW, "-k", "1", cache=cache, cwd=vault,
                   stdin="\n".join(lines) + "\n")
    assert text.returncode == 2
    assert [h for h in text.stdout.splitlines() if h.startswith("# ")] == [
        "# restic key", "# expense policy", "# token budgets"]
    assert text.stderr.count("mdsearch: error:") == 3
    good = run_cli("search", "--queries", "-", *KW, "--format", "jsonl", cache=cache,
                   cwd=vault, stdin="restic key\ntoken budgets\n")
    assert good.returncode == 0
    assert {json.loads(x)["query"] for x in good.stdout.splitlines()} == {"restic key",
                                                                          "token budgets"}


# ---- where the notes are --------------------------------------------------------------------


def test_no_index_is_created_outside_an_indexed_tree(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "a.md").write_text("# A\n\nApples.\n", "utf-8")
    cache = tmp_path / "cache"
    for args in (("status",), ("search", "apples"), ("search", "apples", "--mode", "keyword"),
                 ("related", "a.md")):
        res = run_cli(*args, cache=cache, cwd=notes / "sub" if args[0] == "status" else notes)
        assert res.returncode == 2, (args, res.stderr)
        assert "no index for" in res.stderr and "or any parent" in res.stderr
        assert "mdsearch index DIR" in res.stderr
    # A named folder that was never indexed, read as it is: nothing either.
    res = run_cli("search", "apples", "--root", str(notes), "--no-update", cache=cache)
    assert res.returncode == 2 and "not indexed yet" in res.stderr
    res = run_cli("status", "--root", str(notes), cache=cache)
    assert res.returncode == 2 and "not indexed yet" in res.stderr
    assert not cache.exists()
    assert sorted(p.name for p in notes.rglob("*")) == ["a.md", "sub"]


def test_commands_find_the_nearest_indexed_folder_above(indexed_vault: IndexedVault) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    deep = vault / "operations"
    status = _json(run_cli("status", "--json", cache=cache, cwd=deep))
    assert Path(status["root"]) == vault.resolve()
    hits = _json(run_cli("search", "restic key", "--mode", "keyword", "--json", "-k", "1",
                         cache=cache, cwd=deep))["results"]
    assert hits[0]["path"] == BACKUP
    # Paths print relative to where the command runs.
    shown = run_cli("search", "restic key", *KW, "-l", "-k", "1", cache=cache, cwd=deep)
    assert shown.stdout.splitlines() == ["Backup and disaster recovery.md"]
    rel = run_cli("related", "Backup and disaster recovery.md", "--line", "3", "-l",
                  cache=cache, cwd=deep)
    assert rel.returncode == 0, rel.stderr
    update = run_cli("index", cache=cache, cwd=deep)
    assert update.returncode == 0, update.stderr
    assert f"updating the index of {vault.resolve()}" in update.stderr
    assert "20 files" in update.stdout and "0 indexed" in update.stdout


# ---- --min-score and --open -------------------------------------------------------------------


def test_min_score_drops_weaker_hits(indexed_vault: IndexedVault) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    q = ("search", "what do we do when more than 5% of requests fail", "--mode", "semantic",
         "--no-update", "-k", "10", "--json")
    every = [h["score"] for h in _json(run_cli(*q, cache=cache, cwd=vault))["results"]]
    floor = round(sorted(every)[len(every) // 2], 3)
    kept = [h["score"] for h in
            _json(run_cli(*q, "--min-score", str(floor), cache=cache, cwd=vault))["results"]]
    assert kept == [s for s in every if s >= floor] and 0 < len(kept) < len(every)
    bad = run_cli(*q, "--min-score", "3", cache=cache, cwd=vault)
    assert bad.returncode == 2 and "--min-score" in bad.stderr


def _recorder(folder: Path, name: str) -> tuple[Path, Path]:
    """An executable that writes the arguments it was given, one per line."""
    out = folder / f"{name}.args"
    script = folder / name
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{out}"\n', "utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, out


def test_open_starts_the_editor_at_the_hit(indexed_vault: IndexedVault, tmp_path: Path) -> None:
    vault, cache = indexed_vault.vault, indexed_vault.cache
    q = ("search", "restic key", *KW, "-k", "3")
    hits = _json(run_cli(*q, "--json", cache=cache, cwd=vault))["results"]
    second = hits[1]
    editor, editor_args = _recorder(tmp_path, "myeditor")
    res = run_cli(*q, "--open", "2", cache=cache, cwd=vault,
                  env={"EDITOR": str(editor), "VISUAL": ""})
    assert res.returncode == 0, res.stderr
    assert editor_args.read_text().splitlines() == [f"+{second['line']}", second["file"]]
    # VS Code (a `code` on PATH) takes -g FILE:LINE; $VISUAL wins over $EDITOR.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _code, code_args = _recorder(bin_dir, "code")
    res = run_cli(*q, "--open", "1", cache=cache, cwd=vault,
                  env={"VISUAL": "code --wait", "EDITOR": str(editor),
                       "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert res.returncode == 0, res.stderr
    assert code_args.read_text().splitlines() == ["--wait", "-g",
                                                  f"{hits[0]['file']}:{hits[0]['line']}"]
    res = run_cli(*q, "--open", "9", cache=cache, cwd=vault, env={"EDITOR": str(editor)})
    assert res.returncode == 2 and "--open 9: there are 3 hits" in res.stderr
    nothing = tmp_path / "no-editors"  # neither variable set, and no vi to fall back to
    nothing.mkdir()
    res = run_cli(*q, "--open", "1", cache=cache, cwd=vault,
                  env={"EDITOR": "", "VISUAL": "", "PATH": str(nothing)})
    assert res.returncode == 2 and "$EDITOR" in res.stderr


@pytest.mark.skipif(not __import__("shutil").which("nvim"), reason="nvim is not installed")
def test_open_in_neovim_lands_on_the_line(indexed_vault: IndexedVault, tmp_path: Path) -> None:
    """``+LINE FILE`` as real Neovim reads it: the cursor is on the hit's first line."""
    vault, cache = indexed_vault.vault, indexed_vault.cache
    out = tmp_path / "where.txt"
    wrapper = tmp_path / "nvim-report"
    wrapper.write_text(
        "#!/bin/sh\nexec nvim --headless --clean \"$@\" "
        f"-c 'call writefile([line(\".\"), expand(\"%:p\"), getline(\".\")], \"{out}\")' "
        "-c 'qa!'\n", "utf-8")
    wrapper.chmod(0o755)
    q = ("search", "pgbackrest stanza", *KW, "-k", "1")
    hit = _json(run_cli(*q, "--json", cache=cache, cwd=vault))["results"][0]
    res = run_cli(*q, "--open", "1", cache=cache, cwd=vault, env={"EDITOR": str(wrapper)})
    assert res.returncode == 0, res.stderr
    line, path, text = out.read_text("utf-8").splitlines()
    assert (int(line), Path(path)) == (hit["line"], Path(hit["file"]))
    assert text.lstrip("#").strip() == hit["title"]


# ---- help and typos --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["index", "search", "related", "status", "serve"])
def test_each_help_ends_with_examples(command: str, tmp_path: Path) -> None:
    res = run_cli(command, "--help", cache=tmp_path)
    assert res.returncode == 0
    tail = res.stdout.rstrip().split("\n\n")
    examples = next(block for block in tail if block.startswith("examples:"))
    assert f"mdsearch {command}" in examples
    assert res.stdout.rstrip().endswith(tail[-1]) and tail.index(examples) >= len(tail) - 2


def test_bare_mdsearch_and_help_say_how_to_start(tmp_path: Path) -> None:
    bare = run_cli(cache=tmp_path)
    assert bare.returncode == 2
    helped = run_cli("--help", cache=tmp_path)
    assert helped.returncode == 0
    for text in (bare.stderr, helped.stdout):
        assert "getting started:" in text and "mdsearch index ~/notes" in text
        for command in ("index", "search", "related", "status", "serve"):
            assert re.search(rf"(?m)^\s+{command}\s", text), command


def test_typos_get_a_did_you_mean(tmp_path: Path) -> None:
    res = run_cli("serch", "backup keys", cache=tmp_path)
    assert res.returncode == 2
    assert "did you mean 'search'?" in res.stderr
    res = run_cli("backup keys", cache=tmp_path)
    assert res.returncode == 2 and "mdsearch search 'backup keys'" in res.stderr
    res = run_cli("search", "x", "--limt", "3", cache=tmp_path)
    assert res.returncode == 2 and "did you mean --limit?" in res.stderr
    # a flag of another command is not "meant" as itself
    res = run_cli("index", str(tmp_path), "--json", cache=tmp_path)
    assert res.returncode == 2 and "--json is not an option of this command" in res.stderr
    assert "did you mean --json" not in res.stderr


# ---- the query first, and an index still being built -------------------------------------------


def test_a_bad_query_is_reported_before_anything_is_opened(tmp_path: Path) -> None:
    """The query is parsed first: a malformed filter is the error even where no notes exist."""
    res = run_cli("search", "invoices modified:yesterday", "--root", str(tmp_path / "nowhere"),
                  cache=tmp_path / "cache")
    assert res.returncode == 2
    assert "modified:yesterday" in res.stderr and "not found" not in res.stderr
    assert not (tmp_path / "cache").exists()


def test_json_says_when_the_index_is_still_being_built(
    tmp_path: Path, real_embedder: object
) -> None:
    from mdsearch_ls.config import Settings
    from mdsearch_ls.engine.api import Folders

    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text in (("a", "Apples grow in orchards."), ("b", "Boats sail on the sea."),
                       ("c", "Clocks tick in towers.")):
        (notes / f"{name}.md").write_text(f"# {name.upper()}\n\n{text}\n", "utf-8")
    cache = tmp_path / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MDSEARCH_CACHE_DIR", str(cache))
        holder = Folders(Settings(), embedder=real_embedder, watch=False)  # type: ignore[arg-type]
        try:
            folder = holder.add(notes, Settings())
            assert folder is not None
            folder.start_index().result(timeout=300)
            folder.ws._record_state("building", 1, 3)  # as a holder mid-way through a build
            folder.ws._indexing = True
            res = run_cli("search", "orchards", "--mode", "keyword", "--json", "--no-update",
                          cache=cache, cwd=notes)
        finally:
            holder.close(timeout=30)
    out = _json(res)
    assert out["index"] == {"state": "building", "files_done": 1, "files_total": 3}
    assert "still being built (1 of 3 notes so far)" in res.stderr
    assert out["results"][0]["path"] == "a.md"


def test_a_reader_that_leaves_early_ends_the_search_quietly(indexed_vault, tmp_path) -> None:
    """``mdsearch search … | head -1`` printed "error: [Errno 32] Broken pipe" and exited 1
    (issue 27): quiet, exit 141 as grep's SIGPIPE. A batch of queries writes far more than a
    pipe holds, so the writes after the reader left must fail."""
    queries = tmp_path / "queries.txt"
    queries.write_text("\n".join(f"late invoices {i}" for i in range(80)) + "\n")
    env = {**os.environ, "MDSEARCH_CACHE_DIR": str(indexed_vault.cache), "COLUMNS": "100"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mdsearch_ls", "search", "--queries", str(queries), "--root",
         str(indexed_vault.vault), "-k", "50", "--format", "jsonl"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline()  # the first hit, then the reader goes
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 141, err
    assert "Broken pipe" not in err and "Traceback" not in err, err
