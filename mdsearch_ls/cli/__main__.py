"""``python -m mdsearch_ls.cli``, as it ran when the CLI was one module."""

from mdsearch_ls.cli import run

if __name__ == "__main__":  # pragma: no cover
    run()
