"""``python -m mdsearch_ls`` is the CLI, so editors can start the server without a PATH entry."""

from mdsearch_ls.cli import run

if __name__ == "__main__":
    run()
