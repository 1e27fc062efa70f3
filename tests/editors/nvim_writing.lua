-- Writing help through Neovim 0.7+'s built-in LSP client: link completion after [[ in an edited
-- buffer, and the "Link to" code action applied with Neovim's own workspace-edit code.
-- Env: MDSEARCH_PYTHON, MDSEARCH_VAULT, MDSEARCH_OUT, MDSEARCH_PARAGRAPH, MDSEARCH_NOTE,
-- MDSEARCH_LINE (0-based line inside the section to act on).
local out_path = os.getenv("MDSEARCH_OUT")
local vault = os.getenv("MDSEARCH_VAULT")
local result = { steps = {} }

local function finish(code)
  local f = io.open(out_path, "w")
  f:write(vim.fn.json_encode(result))
  f:close()
  vim.cmd(code == 0 and "qall!" or "cquit! " .. code)
end

local ok, err = pcall(function()
  local client_id = vim.lsp.start_client({
    name = "mdsearch",
    cmd = { os.getenv("MDSEARCH_PYTHON"), "-m", "mdsearch_ls", "serve" },
    root_dir = vault,
    workspace_folders = { { uri = vim.uri_from_fname(vault), name = "vault" } },
  })
  assert(client_id, "start_client failed")
  local client = vim.lsp.get_client_by_id(client_id)

  -- A new note being written: a paragraph, then "[[" (never saved).
  vim.cmd("edit " .. vim.fn.fnameescape(vault .. "/drafts/new.md"))
  local draft = vim.api.nvim_get_current_buf()
  vim.lsp.buf_attach_client(draft, client_id)
  assert(vim.wait(20000, function() return client.initialized end, 100), "no initialize")
  local ready = vim.wait(150000, function()
    local r = client.request_sync("workspace/executeCommand",
      { command = "mdsearch.status", arguments = {} }, 5000, draft)
    return r and r.result and r.result.state == "ready"
  end, 500)
  assert(ready, "not ready")
  table.insert(result.steps, "ready")

  local text = "# Draft"
  local paragraph = os.getenv("MDSEARCH_PARAGRAPH") .. " [["
  vim.api.nvim_buf_set_lines(draft, 0, -1, false, { text, "", paragraph })
  local comp = client.request_sync("textDocument/completion", {
    textDocument = { uri = vim.uri_from_bufnr(draft) },
    position = { line = 2, character = #paragraph },
  }, 30000, draft)
  assert(comp and comp.result, "completion failed: " .. vim.inspect(comp))
  local items = comp.result.items or comp.result
  result.completion = {}
  for i = 1, math.min(#items, 5) do
    table.insert(result.completion, { label = items[i].label, insert = items[i].textEdit.newText })
  end
  -- accept the first the way a completion plugin would: apply its text edit
  vim.lsp.util.apply_text_edits({ items[1].textEdit }, draft, client.offset_encoding)
  result.draft_line = vim.api.nvim_buf_get_lines(draft, 2, 3, false)[1]
  table.insert(result.steps, "completion")

  -- The "Link to" action on a section of an existing note, applied by Neovim.
  vim.cmd("edit " .. vim.fn.fnameescape(vault .. "/" .. os.getenv("MDSEARCH_NOTE")))
  local note = vim.api.nvim_get_current_buf()
  vim.lsp.buf_attach_client(note, client_id)
  local line = tonumber(os.getenv("MDSEARCH_LINE"))
  local act = client.request_sync("textDocument/codeAction", {
    textDocument = { uri = vim.uri_from_bufnr(note) },
    range = { start = { line = line, character = 0 }, ["end"] = { line = line, character = 0 } },
    context = { diagnostics = {} },
  }, 30000, note)
  assert(act and act.result, "codeAction failed: " .. vim.inspect(act))
  result.actions = {}
  local chosen
  for _, a in ipairs(act.result) do
    table.insert(result.actions, a.title)
    if a.title:find("^Link to ") and not chosen then chosen = a end
  end
  assert(chosen, "no Link to action: " .. vim.inspect(result.actions))
  vim.lsp.util.apply_workspace_edit(chosen.edit, client.offset_encoding)
  result.note_lines = vim.api.nvim_buf_get_lines(note, 0, -1, false)
  table.insert(result.steps, "code action")
  client.stop()
  vim.wait(5000, function() return client.is_stopped() end, 100)
end)
if not ok then
  result.error = tostring(err)
  finish(1)
else
  finish(0)
end
