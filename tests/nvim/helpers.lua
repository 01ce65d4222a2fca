-- Shared by the scripts in tests/nvim, which load it with
-- `dofile(vim.fs.joinpath(vim.fs.dirname(arg[0]), 'helpers.lua'))`: the watchdog, waiting with a
-- deadline, setting agentls up, a buffer's text as its file holds it, opening a file with
-- agentls attached, and ending a script with its JSON result.

local M = {}

--- Quits Neovim with status 124 after `ms`: a hung wait must never hang the test run (the Rust
--- side has its own timeout as well).
function M.watchdog(ms)
  vim.defer_fn(function()
    io.stderr:write('WATCHDOG: the script took too long\n')
    vim.cmd('cquit 124')
  end, ms)
end

--- A `wait_for(what, predicate, ms)` that polls `predicate` for `ms` (default `default_ms`) and
--- raises an error naming `what` when it never holds.
function M.waiter(default_ms)
  return function(what, predicate, ms)
    if not vim.wait(ms or default_ms, predicate, 10) then
      error('timed out waiting for ' .. what, 2)
    end
  end
end

--- The text of `bufnr` as its file holds it (with the final line break, if it has one).
function M.buffer_text(bufnr)
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, true)
  return table.concat(lines, '\n') .. (vim.bo[bufnr].eol and '\n' or '')
end

--- Loads the shipped config from `plugin_dir` and sets agentls up to run `server` with its log
--- in `log_file`, edits sent at once; `extra` adds options (handlers, say).
function M.setup(plugin_dir, server, log_file, extra)
  vim.opt.rtp:append(plugin_dir)
  require('agentls').setup(vim.tbl_extend('force', {
    cmd = { server, '--log-file', log_file },
    cmd_env = { AGENTLS_LOG = 'debug' },
    flags = { debounce_text_changes = 0 },
  }, extra or {}))
end

--- `M.setup`, keeping every `window/showMessage` agentls sends in `output.messages`.
function M.setup_keeping_messages(plugin_dir, server, log_file, output)
  output.messages = output.messages or {}
  M.setup(plugin_dir, server, log_file, {
    handlers = {
      ['window/showMessage'] = function(_, result)
        table.insert(output.messages, result.message)
      end,
    },
  })
end

--- Whether one of `output.messages` holds `needle`.
function M.told(output, needle)
  for _, message in ipairs(output.messages) do
    if message:find(needle, 1, true) then
      return true
    end
  end
  return false
end

--- agentls's diagnostics in `bufnr` (one per change of a review).
function M.review_diagnostics(bufnr)
  return vim.tbl_filter(function(d)
    return d.source == 'agentls'
  end, vim.diagnostic.get(bufnr))
end

--- Edits `path` and waits (with `wait_for`) until agentls is attached to it and initialized;
--- returns the buffer and the client.
function M.edit_attached(path, wait_for)
  vim.cmd.edit(vim.fn.fnameescape(path))
  local bufnr = vim.api.nvim_get_current_buf()
  local client
  wait_for('agentls to attach', function()
    client = vim.lsp.get_clients({ bufnr = bufnr, name = 'agentls' })[1]
    return client ~= nil and client.initialized
  end)
  return bufnr, client
end

--- Runs workspace command `command` of `client` with `arguments` for `bufnr`, and waits (with
--- `wait_for`) for its answer, which must not be an error.
function M.exec(client, command, arguments, bufnr, wait_for)
  local done
  client:exec_cmd({ title = command, command = command, arguments = arguments }, { bufnr = bufnr }, function(e)
    done = { err = e }
  end)
  wait_for('command ' .. command, function()
    return done ~= nil
  end)
  assert(not done.err, vim.inspect(done.err))
end

--- Ends a script: records a script error in `output`, stops every client (agentls gets
--- shutdown + exit), prints `output` as one JSON line on stdout, and quits with status 0 only
--- when the script and the stop both succeeded.
function M.finish(ok, err, output)
  if not ok then
    io.stderr:write('[nvim] script error: ' .. tostring(err) .. '\n')
    output.error = tostring(err)
  end
  for _, c in ipairs(vim.lsp.get_clients()) do
    c:stop()
  end
  output.stopped = vim.wait(10000, function()
    return #vim.lsp.get_clients() == 0
  end, 10)
  io.stdout:write(vim.json.encode(output) .. '\n')
  io.stdout:flush()
  vim.cmd((ok and output.stopped) and 'qa!' or 'cquit 1')
end

return M
