-- Driven by tests/editor_nvim.rs: a real Neovim (0.11+) with the shipped editors/nvim config
-- asks agentls's built-in demo agent to uppercase the TODO lines of a file, sees the proposal
-- as agentls diagnostics and code actions, accepts the first change and rejects the second the
-- way a user would (code actions), and prints what happened as ONE JSON line on stdout.
--
--   nvim --headless --clean -l review.lua <plugin dir> <agentls binary> <log file> <notes file>

local plugin_dir, server, log_file, notes = unpack(arg)
assert(notes, 'usage: review.lua PLUGIN_DIR SERVER LOG NOTES')

local helpers = dofile(vim.fs.joinpath(vim.fs.dirname(arg[0]), 'helpers.lua'))
helpers.watchdog(45000)
local wait_for = helpers.waiter(15000)
local buffer_text = helpers.buffer_text

local output = { messages = {} }
local ok, err = xpcall(function()
  vim.opt.rtp:append(plugin_dir)
  require('agentls').setup({
    cmd = { server, '--log-file', log_file },
    cmd_env = { AGENTLS_LOG = 'debug' },
    flags = { debounce_text_changes = 0 },
    handlers = {
      ['window/showMessage'] = function(_, result)
        table.insert(output.messages, result.message)
      end,
    },
  })
  local bufnr, client = helpers.edit_attached(notes, wait_for)

  -- Ask the demo agent; the command returns at once and the turn runs in the background.
  local prompt = client:request_sync('workspace/executeCommand', {
    command = 'agentls.prompt',
    arguments = { { text = 'uppercase notes.txt', uri = vim.uri_from_bufnr(bufnr) } },
  }, 10000, bufnr)
  assert(prompt and not prompt.err, vim.inspect(prompt))

  local function review_diagnostics()
    return vim.tbl_filter(function(d)
      return d.source == 'agentls'
    end, vim.diagnostic.get(bufnr))
  end
  wait_for('the review diagnostics', function()
    return #review_diagnostics() == 2
  end)
  output.diagnostic_lines = vim.tbl_map(function(d)
    return d.lnum
  end, review_diagnostics())

  -- The code actions a user sees on a line, by title.
  local function actions_at(row)
    local params = vim.lsp.util.make_range_params(0, client.offset_encoding)
    params.range = { start = { line = row, character = 0 }, ['end'] = { line = row, character = 0 } }
    params.context = { diagnostics = {} }
    local response = client:request_sync('textDocument/codeAction', params, 10000, bufnr)
    assert(response and not response.err, vim.inspect(response))
    return response.result or {}
  end
  local function run(row, prefix)
    for _, action in ipairs(actions_at(row)) do
      if vim.startswith(action.title, prefix) then
        local done
        client:exec_cmd(action.command, { bufnr = bufnr }, function(e)
          done = { err = e }
        end)
        wait_for('command ' .. action.command.command, function()
          return done ~= nil
        end)
        assert(not done.err, vim.inspect(done.err))
        return action.title
      end
    end
    error(('no action starting with %q at line %d'):format(prefix, row))
  end

  local first, second = output.diagnostic_lines[1], output.diagnostic_lines[2]
  output.titles = vim.tbl_map(function(a)
    return a.title
  end, actions_at(first))
  run(first, 'Accept change 1/2')
  run(second, 'Reject change 2/2')
  -- The agent hears the verdict first; the accepted change lands once it wrote it.
  wait_for('the accepted change in the buffer', function()
    return vim.api.nvim_buf_get_lines(bufnr, first, first + 1, true)[1]:find('BUY MILK') ~= nil
  end)
  wait_for('the review to close', function()
    return #review_diagnostics() == 0
  end)
  wait_for('the end of the turn', function()
    for _, message in ipairs(output.messages) do
      if message:find('end_turn', 1, true) then
        return true
      end
    end
    return false
  end)
  output.buffer = buffer_text(bufnr)
  local file = io.open(notes, 'r')
  output.disk = file:read('*a')
  file:close()
end, debug.traceback)

helpers.finish(ok, err, output)
