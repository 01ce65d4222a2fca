-- Driven by tests/editor_nvim.rs: the shipped editors/nvim module forwards what another
-- "language server" (here a plain diagnostic namespace) reports on a buffer to agentls as
-- `agentls/didChangeDiagnostics`; prints agentls's view of them as ONE JSON line on stdout.
--
--   nvim --headless --clean -l diagnostics.lua <plugin dir> <agentls binary> <log file> <file>

local plugin_dir, server, log_file, file = unpack(arg)
assert(file, 'usage: diagnostics.lua PLUGIN_DIR SERVER LOG FILE')

local helpers = dofile(vim.fs.joinpath(vim.fs.dirname(arg[0]), 'helpers.lua'))
helpers.watchdog(45000)
local wait_for = helpers.waiter(15000)

local output = {}
local ok, err = xpcall(function()
  vim.opt.rtp:append(plugin_dir)
  require('agentls').setup({
    cmd = { server, '--log-file', log_file },
    diagnostics = { debounce_ms = 50 },
  })
  local bufnr, client = helpers.edit_attached(file, wait_for)
  local function server_diagnostics()
    local response = client:request_sync('workspace/executeCommand', {
      command = 'agentls.debug.state',
      arguments = {},
    }, 10000, bufnr)
    assert(response and not response.err, vim.inspect(response))
    return response.result.diagnostics
  end

  -- Another server reports an error on 漢字 (byte columns 4..10 of line 0) and a hint.
  local other = vim.api.nvim_create_namespace('another-server')
  vim.diagnostic.set(other, bufnr, {
    { lnum = 0, col = 4, end_col = 10, severity = vim.diagnostic.severity.ERROR,
      message = 'unused 漢字', source = 'another-server', code = 'E1' },
    { lnum = 1, col = 0, end_col = 3, severity = vim.diagnostic.severity.HINT,
      message = 'consider renaming', source = 'another-server' },
  })
  wait_for('the forwarded diagnostics', function()
    local d = server_diagnostics()
    return #d == 1 and #d[1].diagnostics == 2
  end)
  output.forwarded = server_diagnostics()

  -- They go away when the other server clears them.
  vim.diagnostic.reset(other, bufnr)
  wait_for('the cleared diagnostics', function()
    return #server_diagnostics() == 0
  end)
  output.cleared = true
end, debug.traceback)

helpers.finish(ok, err, output)
