"""Tests for config: client options merge over defaults; bad values warn and keep the default."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mdsearch_ls.config import (
    CLIENT_KEYS,
    INDEX_FIELDS,
    SEARCH_FIELDS,
    SettingError,
    Settings,
    declared,
    settings_from_client,
    settings_from_flags,
)

REPO = Path(__file__).resolve().parents[2]


def test_defaults_without_options():
    for options in (None, {}):
        settings, warnings = settings_from_client(options)
        assert settings == Settings()
        assert warnings == []


def test_camel_case_keys_map_to_fields():
    settings, warnings = settings_from_client(
        {
            "chunkSize": 800,
            "chunkOverlap": 100,
            "maxResults": 7,
            "mode": "keyword",
            "perFile": 3,
            "documentSymbols": False,
            "batchSize": 64,
            "maxFileBytes": 1234,
            "include": ["notes/**"],
            "exclude": "drafts/, archive/",
            "indexDir": "~/idx",
            "model": "",
        }
    )
    assert warnings == []
    assert settings.chunk_size == 800
    assert settings.chunk_overlap == 100
    assert settings.max_results == 7
    assert settings.mode == "keyword"
    assert settings.per_file == 3
    assert settings.document_symbols is False
    assert settings.batch_size == 64
    assert settings.max_file_bytes == 1234
    assert settings.include == ("notes/**",)
    assert settings.exclude == ("drafts/", "archive/")
    assert settings.index_dir is not None and not settings.index_dir.startswith("~")
    assert settings.model is None  # "" means "the bundled model"


def test_merge_keeps_base_for_keys_not_given():
    base = Settings(max_results=42, mode="semantic")
    settings, warnings = settings_from_client({"perFile": 5}, base)
    assert warnings == []
    assert settings.max_results == 42
    assert settings.mode == "semantic"
    assert settings.per_file == 5


def test_none_value_means_not_set():
    base = Settings(max_results=9)
    settings, warnings = settings_from_client({"maxResults": None}, base)
    assert settings.max_results == 9
    assert warnings == []


def test_nested_hover_object_and_flat_dotted_keys():
    nested, w1 = settings_from_client(
        {"hover": {"enabled": False, "maxResults": 3, "minScore": 0.5}}
    )
    flat, w2 = settings_from_client(
        {"hover.enabled": False, "hover.maxResults": 3, "hover.minScore": 0.5}
    )
    assert w1 == w2 == []
    for s in (nested, flat):
        assert s.hover_enabled is False
        assert s.hover_max_results == 3
        assert s.hover_min_score == 0.5
        assert isinstance(s.hover_min_score, float)


def test_unknown_nested_hover_key_is_warned_with_its_full_name():
    _, warnings = settings_from_client({"hover": {"colour": "red"}})
    assert len(warnings) == 1
    assert "mdsearch.hover.colour" in warnings[0]
    assert "unknown" in warnings[0]


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("chunkSize", 10, "chunk_size"),  # below the minimum
        ("chunkSize", "big", "chunk_size"),
        ("chunkSize", 500.5, "chunk_size"),  # not a whole number
        ("maxResults", True, "max_results"),  # a bool is not a number here
        ("maxResults", 0, "max_results"),
        ("mode", "fuzzy", "mode"),
        ("perFile", -1, "per_file"),
        ("hover.minScore", 2.0, "hover_min_score"),
        ("hover.enabled", "yes", "hover_enabled"),
        ("documentSymbols", 1, "document_symbols"),
        ("include", [1, 2], "include"),
        ("indexDir", 5, "index_dir"),
        ("batchSize", 0, "batch_size"),
    ],
)
def test_invalid_value_warns_naming_setting_and_keeps_default(key, value, field):
    base = Settings()
    settings, warnings = settings_from_client({key: value}, base)
    assert getattr(settings, field) == getattr(base, field)
    assert len(warnings) == 1, warnings
    assert f"mdsearch.{key}" in warnings[0]
    assert repr(getattr(base, field)) in warnings[0]  # says what it uses instead


def test_invalid_value_keeps_the_base_value_not_the_class_default():
    base = Settings(max_results=33)
    settings, warnings = settings_from_client({"maxResults": "lots"}, base)
    assert settings.max_results == 33
    assert "33" in warnings[0]


def test_one_bad_key_does_not_drop_the_good_ones():
    settings, warnings = settings_from_client({"maxResults": -5, "perFile": 4, "mode": "semantic"})
    assert settings.per_file == 4
    assert settings.mode == "semantic"
    assert settings.max_results == Settings().max_results
    assert len(warnings) == 1


def test_unknown_keys_are_warned_client_only_keys_are_not():
    settings, warnings = settings_from_client(
        {"maxResult": 5, "server": {"python": "/usr/bin/python3"}, "trace": {"server": "off"}}
    )
    assert settings == Settings()
    assert warnings == ["mdsearch.maxResult: unknown setting, ignored"]


def test_non_mapping_options_warn_and_keep_base():
    base = Settings(per_file=7)
    settings, warnings = settings_from_client(["not", "an", "object"], base)  # type: ignore[arg-type]
    assert settings is base
    assert len(warnings) == 1 and "expected an object" in warnings[0]


def test_overlap_not_smaller_than_size_is_corrected():
    settings, warnings = settings_from_client({"chunkSize": 300, "chunkOverlap": 300})
    assert settings.chunk_size == 300
    assert settings.chunk_overlap == 200  # the default still fits under 300
    assert any("chunkOverlap" in w and "chunkSize" in w for w in warnings)


def test_overlap_falls_to_zero_when_the_default_does_not_fit():
    settings, warnings = settings_from_client({"chunkSize": 150, "chunkOverlap": 400})
    assert settings.chunk_size == 150
    assert settings.chunk_overlap == 0
    assert settings.chunk_overlap < settings.chunk_size
    assert warnings


def test_small_chunk_size_alone_makes_the_default_overlap_invalid():
    settings, warnings = settings_from_client({"chunkSize": 150})
    assert settings.chunk_overlap < settings.chunk_size
    assert len(warnings) == 1


def test_flags_apply_only_when_given_and_keep_the_base():
    base = Settings(max_results=11)
    same = settings_from_flags({"model": None, "chunk_size": None}, base)
    assert same == base
    changed = settings_from_flags({"chunk_size": 500, "model": None}, base)
    assert changed.chunk_size == 500
    assert changed.max_results == 11
    assert dataclasses.replace(changed, chunk_size=1000) == base


@pytest.mark.parametrize(
    ("values", "flag"),
    [
        ({"chunk_size": -5}, "--chunk-size"),
        ({"chunk_size": "big"}, "--chunk-size"),
        ({"chunk_overlap": 99_999}, "--chunk-overlap"),
        ({"mode": "fuzzy"}, "--mode"),
        ({"chunk_size": 300, "chunk_overlap": 300}, "--chunk-overlap"),
    ],
)
def test_bad_flag_values_are_errors_naming_the_flag(values, flag):
    with pytest.raises(SettingError, match=flag):
        settings_from_flags(values)


def test_every_setting_is_declared_once_with_a_check_and_a_doc():
    infos = list(declared())
    assert len({i.client for i in infos}) == len(infos)
    for info in infos:
        assert info.doc.endswith(".") and len(info.doc) > 20, info.name
        assert info.check(info.default) == info.default or info.default is None, info.name
        assert CLIENT_KEYS[info.client] == info.name
    assert set(SEARCH_FIELDS).isdisjoint(INDEX_FIELDS)


def test_package_json_and_readme_table_are_generated_from_the_declarations():
    """The VS Code settings and the README table are derived from config.py; a hand edit of
    either, or a new setting without re-running the generator, fails here."""
    res = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "sync_settings.py"), "--check"],
        capture_output=True, text=True, timeout=60,
    )
    assert res.returncode == 0, res.stderr


def test_vscode_package_json_declares_each_server_setting_as_the_server_does():
    package = json.loads((REPO / "vscode-extension" / "package.json").read_text("utf-8"))
    props = package["contributes"]["configuration"]["properties"]
    for info in declared():
        if info.client == "documentSymbols":
            continue  # the extension always sends false: VS Code has its own outline
        prop = props[f"mdsearch.{info.client}"]
        default = list(info.default) if isinstance(info.default, tuple) else info.default
        assert prop["default"] == ("" if default is None else default)
        assert prop["scope"] == info.scope
        bounds = getattr(info.check, "bounds", None)
        if bounds:
            assert (prop["minimum"], prop["maximum"]) == bounds


def test_fusion_setting():
    assert settings_from_client({"fusion": "convex"})[0].fusion == "convex"
    settings, warnings = settings_from_client({"fusion": "average"})
    assert settings.fusion == "convex" and "mdsearch.fusion" in warnings[0]


@pytest.mark.parametrize(("given", "problem"), [
    ("127.0.0.1:8000", "expected a URL such as http://127.0.0.1:8000"),
    ("ftp://127.0.0.1:8000", "expected a URL such as http://127.0.0.1:8000"),
    ("http://127.0.0.1", "expected a port"),
    ("http://127.0.0.1:99999", r"expected a URL such as http://127.0.0.1:8000 \(a bad port\)"),
    ("http://127.0.0.1:8000/api/v2", "expected only a scheme, host and port"),
    ("http://user:secret@127.0.0.1:8000", "expected only a scheme, host and port"),
    (8000, "expected a URL"),
])
def test_a_chroma_url_is_a_scheme_host_and_port(given, problem):
    with pytest.raises(SettingError, match="--chroma-url: " + problem):
        settings_from_flags({"chroma_url": given})
    settings, warnings = settings_from_client({"chromaUrl": given})
    assert settings.chroma_url is None  # the client's bad value falls back to the local store
    assert warnings and "mdsearch.chromaUrl" in warnings[0]


def test_a_chroma_url_is_kept_as_given_without_a_trailing_slash():
    assert settings_from_flags({"chroma_url": "http://127.0.0.1:8001/"}).chroma_url == \
        "http://127.0.0.1:8001"
    assert settings_from_client({"chromaUrl": "https://[::1]:8443"})[0].chroma_url == \
        "https://[::1]:8443"
    assert settings_from_client({"chromaUrl": ""})[0].chroma_url is None
