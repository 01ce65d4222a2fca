-- Driven by tests/editor_nvim.rs: a real Neovim (0.11+) with the shipped editors/nvim config
-- asks agentls's built-in demo agent to uppercase the TODO lines of a file, sees the proposal
-- as agentls diagnostics and code actions, types an unsaved line between the changes, accepts
-- the first change and rejects the second the way a user would (code actions), then saves with
-- a plain `:write` (the file must not have changed under Neovim), and prints what happened as
-- ONE JSON line on stdout.
--
--   nvim --headless --clean -l review.lua <plugin dir> <agentls binary> <log file> <notes file>

local plugin_dir, server, log_file, notes = unpack(arg)
assert(notes, 'usage: review.lua PLUGIN_DIR SERVER LOG NOTES')

local helpers = dofile(vim.fs.joinpath(vim.fs.dirname(arg[0]), 'helpers.lua'))
helpers.watchdog(45000)
local wait_for = helpers.waiter(15000)
local buffer_text = helpers.buffer_text

local output = {}
local ok, err = xpcall(function()
  helpers.setup_keeping_messages(plugin_dir, server, log_file, output)
  local bufnr, client = helpers.edit_attached(notes, wait_for)

  -- Ask the demo agent; the command returns at once and the turn runs in the background.
  local prompt = client:request_sync('workspace/executeCommand', {
    command = 'agentls.prompt',
    arguments = { { text = 'uppercase notes.txt', uri = vim.uri_from_bufnr(bufnr) } },
  }, 10000, bufnr)
  assert(prompt and not prompt.err, vim.inspect(prompt))

  local function review_diagnostics()
    return helpers.review_diagnostics(bufnr)
  end
  wait_for('the review diagnostics', function()
    return #review_diagnostics() == 2
  end)
  output.diagnostic_lines = vim.tbl_map(function(d)
    return d.lnum
  end, review_diagnostics())
  -- The user types a line between the two changes, and does not save it.
  vim.api.nvim_buf_set_lines(bufnr, 3, 3, true, { 'mine' })
  wait_for('the second change to move down a line', function()
    local lines = vim.tbl_map(function(d)
      return d.lnum
    end, review_diagnostics())
    table.sort(lines)
    return #lines == 2 and lines[1] == 1 and lines[2] == 6
  end)

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

  local first, second = 1, 6
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
    return helpers.told(output, 'end_turn')
  end)
  output.buffer = buffer_text(bufnr)
  local function disk()
    local file = io.open(notes, 'r')
    local text = file:read('*a')
    file:close()
    return text
  end
  output.disk_before_save = disk()
  -- Saving as a user does: Neovim would warn (W11/W12) had the file changed under it.
  local changed_under_us = false
  vim.api.nvim_create_autocmd('FileChangedShell', {
    buffer = bufnr,
    callback = function()
      changed_under_us = true
      vim.v.fcs_choice = ''
    end,
  })
  vim.cmd('checktime')
  output.changed_on_disk = changed_under_us
  if not changed_under_us then
    vim.cmd('write')
  end
  output.modified_after_save = vim.bo[bufnr].modified
  output.disk = disk()
end, debug.traceback)

helpers.finish(ok, err, output)
