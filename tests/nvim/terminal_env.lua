-- Driven by tests/mcp_nvim.rs: a real Neovim (0.11+) attaches agentls to a file and runs the
-- README's terminal one-liner, with a shell command standing in for `claude` that writes the
-- environment it got to a file. The Rust side makes the assertions.
--
--   nvim --headless --clean -l terminal_env.lua <agentls binary> <file to open> <output file>

local server, file, output = unpack(arg)
assert(output, 'usage: terminal_env.lua SERVER FILE OUTPUT')
vim.defer_fn(function()
  io.stderr:write('WATCHDOG: the script took too long\n')
  vim.cmd('cquit 124')
end, 30000)

local ok, err = xpcall(function()
  vim.lsp.config('agentls', { cmd = { server }, root_markers = { '.git' } })
  vim.lsp.enable('agentls')
  vim.cmd.edit(file)
  assert(vim.wait(10000, function()
    return #vim.lsp.get_clients({ name = 'agentls', bufnr = 0 }) > 0
      and vim.lsp.get_clients({ name = 'agentls', bufnr = 0 })[1].initialized
  end, 10), 'agentls did not attach')

  local agent = { 'sh', '-c', 'env | grep -E "^(CLAUDE_CODE|GEMINI_CLI_IDE)" > ' .. output }
  -- The README's Neovim one-liner, with `agent` for 'claude'.
  vim.lsp.get_clients({ name = 'agentls', bufnr = 0 })[1]:request('workspace/executeCommand',
    { command = 'agentls.terminalEnv', arguments = {} },
    function(_, env) vim.cmd('botright split'); vim.fn.jobstart(agent, { term = true, env = env }) end)

  assert(vim.wait(10000, function()
    local f = io.open(output, 'r')
    if not f then return false end
    local text = f:read('*a')
    f:close()
    return text:find('GEMINI_CLI_IDE_AUTH_TOKEN') ~= nil
  end, 20), 'the terminal never ran with the env')
end, debug.traceback)
if not ok then
  io.stderr:write(tostring(err) .. '\n')
  vim.cmd('cquit 1')
end
vim.cmd('qall!')
