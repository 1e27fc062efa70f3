-- Drives the mdsearch client that a snippet of docs/editors.md started in Neovim (0.7 to 0.11):
-- the note is already open, the snippet is the init.lua; this waits for the client the snippet
-- attached to the note, then asks what a user's keys ask (workspace/symbol, hover) and writes
-- the answers as JSON. Env: MDSEARCH_OUT, MDSEARCH_QUERY, MDSEARCH_LINE (0-based).
local out_path = os.getenv("MDSEARCH_OUT")
local result = { version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor) }

local function finish(code)
  local f = io.open(out_path, "w")
  f:write(vim.fn.json_encode(result))
  f:close()
  vim.cmd(code == 0 and "qall!" or "cquit! " .. code)
end

-- 0.11 made the client's methods take self (the dot forms are deprecated there).
local new_api = vim.fn.has("nvim-0.11") == 1

local function request(client, method, params, timeout, bufnr)
  if new_api then
    return client:request_sync(method, params, timeout, bufnr)
  end
  return client.request_sync(method, params, timeout, bufnr)
end

local function attached(bufnr)
  local clients = vim.lsp.get_clients and vim.lsp.get_clients({ bufnr = bufnr })
    or vim.tbl_values(vim.lsp.buf_get_clients(bufnr))
  for _, c in ipairs(clients) do
    if c.name == "mdsearch" then
      return c
    end
  end
end

local ok, err = pcall(function()
  local bufnr = vim.api.nvim_get_current_buf()
  result.filetype = vim.bo[bufnr].filetype
  local client
  assert(vim.wait(20000, function()
    client = attached(bufnr)
    return client ~= nil and client.initialized
  end, 100), "no mdsearch client attached to the note and initialized")
  result.root = client.config.root_dir
  result.workspace_folders = client.workspace_folders

  local state
  local ready = vim.wait(150000, function()
    local r = request(client, "workspace/executeCommand",
      { command = "mdsearch.status", arguments = {} }, 5000, bufnr)
    state = r and r.result and r.result.state
    return state == "ready"
  end, 500)
  assert(ready, "not ready: " .. tostring(state))

  local sym = request(client, "workspace/symbol", { query = os.getenv("MDSEARCH_QUERY") }, 20000, bufnr)
  assert(sym and sym.result, "workspace/symbol failed: " .. vim.inspect(sym))
  result.symbols = sym.result

  local hov = request(client, "textDocument/hover", {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = { line = tonumber(os.getenv("MDSEARCH_LINE")), character = 0 },
  }, 20000, bufnr)
  assert(hov and hov.result, "hover failed: " .. vim.inspect(hov))
  result.hover = hov.result
  result.note_uri = vim.uri_from_bufnr(bufnr)
  if new_api then
    client:stop()
    vim.wait(5000, function() return client:is_stopped() end, 100)
  else
    client.stop()
    vim.wait(5000, function() return client.is_stopped() end, 100)
  end
end)
if not ok then
  result.error = tostring(err)
  finish(1)
else
  finish(0)
end
