---@brief
---
--- https://github.com/mdsearch/mdsearch
---
--- Search markdown notes by meaning and by exact words, offline: `workspace/symbol` searches
--- the notes (`:lua vim.lsp.buf.workspace_symbol("how do I ...")`), hover shows related
--- sections of other notes, `[[` completes links ranked by what the paragraph says.
---
--- Install the server with `pipx install mdsearch-ls` or `uv tool install mdsearch-ls` (it
--- puts `mdsearch` on your PATH and brings its embedding model). The folder indexed is the
--- Obsidian vault (`.obsidian`) or else the git repository around the note; a note in neither
--- starts no server. Settings go in `init_options` (see the README's settings table), e.g.
--- ```lua
--- vim.lsp.config('mdsearch', { init_options = { maxResults = 10 } })
--- ```

---@type vim.lsp.Config
return {
  cmd = { 'mdsearch', 'serve' },
  filetypes = { 'markdown' },
  root_markers = { '.obsidian', '.git' },
  workspace_required = true,
}
