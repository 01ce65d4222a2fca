-- Driven by tests/editor_nvim.rs: the shipped plugin shows the demo agent's two-change proposal
-- inline (the old lines highlighted, the new ones as virtual lines under them, a label with the
-- keys), `]e` goes from one change to the next, :AgentDiff shows the proposal beside the buffer
-- in diff mode, and the plugin's keys accept the first change and reject the second as a user
-- types them; then the marks and the keys are gone. An agent's change that lands unasked is
-- undone with the same keys, and one written to disk under an unsaved edit is saved by :w
-- without W12. Prints what happened as ONE JSON line.
--
--   nvim --headless --clean -l inline_review.lua <plugin dir> <agentls binary> <log file> <notes file>

local plugin_dir, server, log_file, notes = unpack(arg)
assert(notes, 'usage: inline_review.lua PLUGIN_DIR SERVER LOG NOTES')

local helpers = dofile(vim.fs.joinpath(vim.fs.dirname(arg[0]), 'helpers.lua'))
helpers.watchdog(45000)
local wait_for = helpers.waiter(15000)

local output = { notified = {} }
local ok, err = xpcall(function()
  vim.notify = function(message)
    table.insert(output.notified, message)
  end
  helpers.setup(plugin_dir, server, log_file)
  local reviews = require('agentls.reviews')
  local bufnr = helpers.edit_attached(notes, wait_for)
  local ns = vim.api.nvim_create_namespace('agentls.reviews')

  -- agentls's messages: a warning whole; information arriving together on one line that fits.
  local client = vim.lsp.get_clients({ bufnr = bufnr, name = 'agentls' })[1]
  local show = client.handlers['window/showMessage']
  show(nil, { type = 2, message = 'agentls: ' .. string.rep('w', 300) }, {})
  show(nil, { type = 3, message = 'first' }, {})
  show(nil, { type = 3, message = string.rep('i', 300) }, {})
  wait_for('the information line', function()
    return #output.notified == 2
  end)
  output.shown = output.notified
  output.echospace = vim.v.echospace
  output.notified = {}

  vim.cmd('AgentPrompt uppercase notes.txt')
  wait_for('two changes drawn', function()
    return #reviews.pending(bufnr) == 2
  end)
  output.pending = reviews.pending(bufnr)

  -- What the marks show: the virtual lines (new text) and the labels, by row.
  local function marks()
    local out = { virt_lines = {}, labels = {}, highlighted = {} }
    for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, { details = true })) do
      local row, details = mark[2], mark[4]
      for _, line in ipairs(details.virt_lines or {}) do
        table.insert(out.virt_lines, { row = row, text = line[1][1], hl = line[1][2] })
      end
      if details.virt_text then
        table.insert(out.labels, { row = row, text = details.virt_text[1][1] })
      end
      if details.hl_group then
        table.insert(out.highlighted, { row = row, end_row = details.end_row, hl = details.hl_group })
      end
    end
    return out
  end
  output.marks = marks()
  output.keys = vim.tbl_map(function(map)
    return map.lhs
  end, vim.api.nvim_buf_get_keymap(bufnr, 'n'))
  table.sort(output.keys)

  -- ]e from the top goes to the first change, then to the second.
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.api.nvim_feedkeys(']e', 'xt', false)
  output.first_jump = vim.api.nvim_win_get_cursor(0)[1]
  vim.api.nvim_feedkeys(']e', 'xt', false)
  output.second_jump = vim.api.nvim_win_get_cursor(0)[1]

  -- :AgentDiff: the proposal beside the buffer, both windows in diff mode.
  vim.cmd('AgentDiff')
  local view = vim.api.nvim_get_current_buf()
  output.diff_name = vim.api.nvim_buf_get_name(view)
  output.diff_text = table.concat(vim.api.nvim_buf_get_lines(view, 0, -1, false), '\n')
  output.diff_windows = 0
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.wo[win].diff then
      output.diff_windows = output.diff_windows + 1
    end
  end
  -- `q` closes it, and the file's window leaves diff mode.
  vim.api.nvim_feedkeys('q', 'xt', false)
  wait_for('the diff view to close', function()
    return not vim.api.nvim_buf_is_valid(view) and not vim.wo.diff
  end)
  output.diff_closed = vim.api.nvim_get_current_buf() == bufnr and #vim.api.nvim_tabpage_list_wins(0) == 1

  -- The keys, typed: accept on the first change, reject on the second.
  vim.api.nvim_win_set_cursor(0, { 2, 3 })
  vim.api.nvim_feedkeys('\\aa', 'xt', false)
  wait_for('the first change accepted', function()
    local p = reviews.pending(bufnr)
    return #p == 2 and p[1].state == 'approved'
  end)
  output.after_accept = marks()
  vim.api.nvim_win_set_cursor(0, { 6, 0 })
  vim.api.nvim_feedkeys('\\ar', 'xt', false)
  wait_for('the accepted change in the buffer', function()
    return vim.api.nvim_buf_get_lines(bufnr, 1, 2, true)[1] == 'TODO BUY MILK'
  end)
  wait_for('the marks to go', function()
    return #reviews.pending(bufnr) == 0
      and #vim.api.nvim_buf_get_extmarks(bufnr, ns, 0, -1, {}) == 0
  end)
  output.keys_after = #vim.api.nvim_buf_get_keymap(bufnr, 'n')
  output.buffer = helpers.buffer_text(bufnr)

  -- A change made without asking (the agent in a mode that never asks), in another file:
  -- shown the other way round, and `\\aa` undoes it.
  wait_for('the first turn to end', function()
    for _, message in ipairs(output.notified) do
      if message:find('end_turn', 1, true) then
        return true
      end
    end
  end)
  local other = vim.fs.joinpath(vim.fs.dirname(notes), 'other.txt')
  vim.fn.writefile({ 'keep', 'TODO later' }, other)
  local other_buf = helpers.edit_attached(other, wait_for)
  vim.cmd('AgentPrompt uppercase other.txt @unasked')
  wait_for('the landed change drawn', function()
    return #reviews.pending(other_buf) == 1
  end)
  bufnr = other_buf
  output.landed = marks()
  output.landed_buffer = helpers.buffer_text(other_buf)
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  vim.api.nvim_feedkeys('\\aa', 'xt', false)
  wait_for('the landed change undone', function()
    return #reviews.pending(other_buf) == 0
      and vim.api.nvim_buf_get_lines(other_buf, 1, 2, true)[1] == 'TODO later'
  end)

  -- An accepted change the agent then writes to disk itself, under an unsaved edit of yours
  -- made while it waited: the buffer has both, the plugin has Neovim read the file again with
  -- your edit kept, and :w writes without asking whether to overwrite a changed file (W12).
  local third = vim.fs.joinpath(vim.fs.dirname(notes), 'third.txt')
  vim.fn.writefile({ 'keep', 'TODO later' }, third)
  local third_buf = helpers.edit_attached(third, wait_for)
  vim.cmd('AgentPrompt uppercase third.txt @diskwrite')
  wait_for('the proposal drawn', function()
    return #reviews.pending(third_buf) == 1
  end)
  vim.api.nvim_set_current_buf(third_buf)
  vim.api.nvim_buf_set_lines(third_buf, 0, 1, true, { 'mine' })
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  vim.api.nvim_feedkeys('\\aa', 'xt', false)
  wait_for('the file read again under the edit', function()
    return vim.b[third_buf].agentls_disk_in_buffer ~= nil
  end)
  output.disk_in_buffer = {
    buffer = helpers.buffer_text(third_buf),
    modified = vim.bo[third_buf].modified,
    disk = table.concat(vim.fn.readfile(third), '\n'),
  }
  vim.api.nvim_set_current_buf(third_buf)
  vim.cmd('write')
  output.disk_in_buffer.written = table.concat(vim.fn.readfile(third), '\n')
  output.disk_in_buffer.modified_after_write = vim.bo[third_buf].modified
end, debug.traceback)

helpers.finish(ok, err, output)
