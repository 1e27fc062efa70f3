"""mdsearch: local semantic search for markdown notes, inside the editor."""

__version__ = "0.1.0"
