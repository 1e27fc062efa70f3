"""``mdsearch mcp``: the MCP server, so an AI assistant reads the one section it needs.

The third front end over the engine's seam (``mdsearch_ls.engine.api``), beside the CLI and the
language server; it holds no search logic. Layout:

* :mod:`.server`: the official SDK's ``MCPServer`` over stdio, start-up order and exit;
* :mod:`.http`: the same server over streamable HTTP, its members' tokens and where it listens;
* :mod:`.wire`: the stdio lines the SDK would drop without an answer, answered;
* :mod:`.tools`: the five tools and their arguments (SDK-free); :mod:`.answers` and
  :mod:`.read_section` turn answers into text within a token budget;
* :mod:`.roots`: the folders served, through the engine's ``Folders`` (protocol-free; the
  engine watches the notes of the folders this process holds);
* :mod:`.tokens`: the token estimate behind every ``max_tokens``.
"""
