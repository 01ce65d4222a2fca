-- Driven by tests/editor_nvim.rs: a real Neovim (0.11+) with the shipped editors/nvim config
-- has the demo agent uppercase the TODO lines of a file, accepts every change and saves, then
-- undoes the whole turn with :AgentUndoTurn: the turn's changes come back as a review, the
-- plugin's `<leader>aA` undoes them all, and a plain `:write` saves the file as it was. Prints
-- what happened as ONE JSON line on stdout.
--
--   nvim --headless --clean -l undo_turn.lua <plugin dir> <agentls binary> <log file> <notes file>

local plugin_dir, server, log_file, notes = unpack(arg)
assert(notes, 'usage: undo_turn.lua PLUGIN_DIR SERVER LOG NOTES')

local helpers = dofile(vim.fs.joinpath(vim.fs.dirname(arg[0]), 'helpers.lua'))
helpers.watchdog(45000)
local wait_for = helpers.waiter(15000)
local buffer_text = helpers.buffer_text

local output = {}
local ok, err = xpcall(function()
  helpers.setup_keeping_messages(plugin_dir, server, log_file, output)
  local bufnr, client = helpers.edit_attached(notes, wait_for)
  local function told(needle)
    return helpers.told(output, needle)
  end
  local function review_diagnostics()
    return helpers.review_diagnostics(bufnr)
  end

  helpers.exec(client, 'agentls.prompt', { { text = 'uppercase notes.txt', uri = vim.uri_from_bufnr(bufnr) } },
    bufnr, wait_for)
  wait_for('the review diagnostics', function()
    return #review_diagnostics() == 2
  end)
  -- Every change accepted with the plugin's key, and saved.
  vim.cmd.normal('\\aA')
  wait_for('the end of the turn', function()
    return told('end_turn') and #review_diagnostics() == 0
  end)
  output.accepted = buffer_text(bufnr)
  vim.cmd('write')

  -- The whole turn undone: its changes come back as a review, all undone with the same key.
  vim.cmd('AgentUndoTurn')
  wait_for('the undo review', function()
    return #review_diagnostics() == 2
  end)
  output.undo_messages = vim.tbl_map(function(d)
    return d.message
  end, review_diagnostics())
  vim.cmd.normal('\\aA')
  wait_for('the old lines back', function()
    return #review_diagnostics() == 0 and not buffer_text(bufnr):find('BUY MILK', 1, true)
  end)
  output.buffer = buffer_text(bufnr)
  vim.cmd('write')
  output.modified_after_save = vim.bo[bufnr].modified
  local file = io.open(notes, 'r')
  output.disk = file:read('*a')
  file:close()
  wait_for('the message saying what is undone', function()
    return told("Undoing demo's turn 1: 1 file to review (notes.txt)")
  end)
end, debug.traceback)

helpers.finish(ok, err, output)
