-- Drives Neovim 0.7+'s built-in LSP client against the mdsearch server; writes JSON results.
-- Env: MDSEARCH_PYTHON, MDSEARCH_VAULT, MDSEARCH_OUT, MDSEARCH_NOTE, MDSEARCH_LINE (0-based).
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
    init_options = { maxResults = 5 },
  })
  assert(client_id, "start_client failed")
  local note = vault .. "/" .. os.getenv("MDSEARCH_NOTE")
  vim.cmd("edit " .. vim.fn.fnameescape(note))
  local bufnr = vim.api.nvim_get_current_buf()
  vim.lsp.buf_attach_client(bufnr, client_id)
  local client = vim.lsp.get_client_by_id(client_id)
  assert(vim.wait(20000, function() return client.initialized end, 100), "no initialize")
  table.insert(result.steps, "initialized")

  local state
  local ready = vim.wait(150000, function()
    local r = client.request_sync("workspace/executeCommand",
      { command = "mdsearch.status", arguments = {} }, 5000, bufnr)
    state = r and r.result and r.result.state
    result.last_status = r and r.result
    return state == "ready"
  end, 500)
  assert(ready, "not ready: " .. tostring(state))
  table.insert(result.steps, "ready")

  local sym = client.request_sync("workspace/symbol",
    { query = "how do I keep my wild yeast culture alive" }, 20000, bufnr)
  assert(sym and sym.result, "workspace/symbol failed: " .. vim.inspect(sym))
  result.symbols = sym.result

  local line = tonumber(os.getenv("MDSEARCH_LINE"))
  local hov = client.request_sync("textDocument/hover", {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = { line = line, character = 0 },
  }, 20000, bufnr)
  assert(hov and hov.result, "hover failed: " .. vim.inspect(hov))
  result.hover = hov.result
  result.note_uri = vim.uri_from_bufnr(bufnr)
  client.stop()
  vim.wait(5000, function() return client.is_stopped() end, 100)
end)
if not ok then
  result.error = tostring(err)
  finish(1)
else
  finish(0)
end
