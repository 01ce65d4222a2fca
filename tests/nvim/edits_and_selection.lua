-- Driven by tests/editor_nvim.rs: a real Neovim (0.11+) runs the shipped editors/nvim config
-- against agentls, edits non-ASCII text, selects in visual mode, and prints what the server
-- believes as ONE JSON line on stdout. The Rust side makes the assertions; this script only
-- fails (exit 1, traceback on stderr) when Neovim itself cannot do what is asked.
--
--   nvim --headless --clean -l edits_and_selection.lua \
--     <plugin dir> <agentls binary> <log file> <sample file> <untyped file> <debounce: 0|default>

local plugin_dir, server, log_file, sample, untyped, debounce = unpack(arg)
assert(debounce, 'usage: edits_and_selection.lua PLUGIN_DIR SERVER LOG SAMPLE UNTYPED 0|default')

local helpers = dofile(vim.fs.joinpath(vim.fs.dirname(arg[0]), 'helpers.lua'))
helpers.watchdog(45000)

local function log(fmt, ...)
  io.stderr:write(('[nvim] ' .. fmt .. '\n'):format(...))
end

local wait_for = helpers.waiter(10000)

-- What Neovim sent, counted by method (LspNotify runs after each notification went out).
local sent = {}
vim.api.nvim_create_autocmd('LspNotify', {
  callback = function(args)
    local list = sent[args.data.method] or {}
    list[#list + 1] = args.data.params
    sent[args.data.method] = list
  end,
})
local function count(method)
  return #(sent[method] or {})
end

local DID_CHANGE = 'textDocument/didChange'
local SELECTION = 'agentls/didChangeSelection'

local buffer_text = helpers.buffer_text

--- 0-based byte column where `needle` starts in line `row` (0-based).
local function col_of(bufnr, row, needle)
  local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, true)[1]
  local at = line:find(needle, 1, true)
  assert(at, ('%q not found in line %d: %q'):format(needle, row, line))
  return at - 1
end

local output = {}
local ok, err = xpcall(function()
  vim.opt.rtp:append(plugin_dir)
  require('agentls').setup({
    cmd = { server, '--log-file', log_file },
    cmd_env = { AGENTLS_LOG = 'debug' },
    flags = debounce == '0' and { debounce_text_changes = 0 } or nil,
  })
  -- Configs merge: the test adds only a hook for the server's exit status.
  vim.lsp.config('agentls', {
    on_exit = function(code, signal)
      output.server_exit = { code = code, signal = signal }
    end,
  })

  local bufnr, client = helpers.edit_attached(sample, wait_for)
  output.offset_encoding = client.offset_encoding
  output.filetype = vim.bo[bufnr].filetype
  log('attached: encoding %s, root %s', client.offset_encoding, tostring(client.root_dir))

  -- Edits. nvim_buf_set_text takes byte columns; `normal!` edits go through the same tracking.
  -- 1. Insert right after the emoji.
  local c = col_of(bufnr, 1, '😀') + #'😀'
  vim.api.nvim_buf_set_text(bufnr, 1, c, 1, c, { '🎉' })
  -- 2. Change CJK characters: 漢字 becomes 汉字漢.
  c = col_of(bufnr, 2, '漢字')
  vim.api.nvim_buf_set_text(bufnr, 2, c, 2, c + #'漢字', { '汉字漢' })
  -- 3. Join the first two lines.
  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  vim.cmd('normal! J')
  -- Let a debounced didChange go out on its own timer (nothing to wait for when debounce is 0).
  local changes = count(DID_CHANGE)
  if debounce ~= '0' then
    wait_for('a debounced didChange', function()
      return count(DID_CHANGE) > changes
    end)
  end
  -- 4. Split the CJK line (now line 1) after "かな".
  c = col_of(bufnr, 1, 'かな') + #'かな'
  vim.api.nvim_buf_set_text(bufnr, 1, c, 1, c, { '', '' })
  -- 5. Append at the end of the last line, then add a new last line.
  vim.cmd('normal! G$a ✓ 末尾')
  vim.cmd('normal! Go새 줄 🦀')
  -- 6. Replace across a line break: from "here" on line 0 to after "汉" on line 1.
  c = col_of(bufnr, 0, 'here')
  vim.api.nvim_buf_set_text(bufnr, 0, c, 1, #'汉', { 'here + ' })
  -- 7. Replace one character in normal mode: the first 字 becomes 子.
  c = col_of(bufnr, 0, '字')
  vim.api.nvim_win_set_cursor(0, { 1, c })
  vim.cmd('normal! r子')
  log('buffer after edits: %q', buffer_text(bufnr))

  -- Select "漢 and か" in visual mode; CursorMoved is what a real UI fires after each motion
  -- (headless with -l has no input loop, so fire it here). The notifier debounces, so the one-
  -- character selection captured on entering visual mode is replaced before anything is sent.
  local selected = count(SELECTION)
  c = col_of(bufnr, 0, '漢 and か')
  vim.api.nvim_win_set_cursor(0, { 1, c })
  vim.cmd('normal! v')
  vim.cmd('normal! 6l')
  vim.api.nvim_exec_autocmds('CursorMoved', { buffer = bufnr })
  wait_for('the visual selection to be sent', function()
    return count(SELECTION) > selected
  end)
  local request = function(buf)
    local response, request_err = client:request_sync(
      'workspace/executeCommand',
      { command = 'agentls.debug.state', arguments = {} },
      10000,
      buf -- the real number: 0 would skip flushing the buffer's pending didChange
    )
    assert(response and not response.err, vim.inspect(request_err or response))
    return response.result
  end
  output.buffer = buffer_text(bufnr)
  output.server = request(bufnr)
  output.sent_selections = vim.deepcopy(sent[SELECTION])

  -- Select "😀🎉" and yank at once: leaving visual mode sends the selection without waiting
  -- for the debounce (otherwise the cursor captured on leaving would replace it unsent); the
  -- cursor position after the yank follows.
  vim.cmd('normal! \27')
  c = col_of(bufnr, 0, '😀')
  vim.api.nvim_win_set_cursor(0, { 1, c })
  selected = count(SELECTION)
  vim.cmd('normal! vl')
  vim.api.nvim_exec_autocmds('CursorMoved', { buffer = bufnr })
  vim.cmd('normal! y')
  output.register = vim.fn.getreg('"')
  wait_for('the cursor after the yank to be sent', function()
    local last = (sent[SELECTION] or {})[count(SELECTION)]
    return last and vim.deep_equal(last.selection.start, last.selection['end'])
  end)
  output.sent_at_yank = count(SELECTION) - selected
  output.after_yank = request(bufnr)

  -- A linewise selection of lines 1-2 covers them with their line breaks.
  selected = count(SELECTION)
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  vim.cmd('normal! Vj')
  vim.api.nvim_exec_autocmds('CursorMoved', { buffer = bufnr })
  wait_for('the linewise selection to be sent', function()
    return count(SELECTION) > selected
  end)
  output.linewise = request(bufnr)
  vim.cmd('normal! \27')

  -- A file Neovim has no type for is attached too (filetypes = nil means every file). It has no
  -- final line break; append to its last line.
  vim.cmd.edit(vim.fn.fnameescape(untyped))
  local untyped_buf = vim.api.nvim_get_current_buf()
  output.untyped_filetype = vim.bo[untyped_buf].filetype
  wait_for('agentls to attach to the untyped file', function()
    local attached = vim.lsp.get_clients({ bufnr = untyped_buf, name = 'agentls' })[1]
    return attached ~= nil and attached.initialized
  end)
  vim.cmd('normal! G$a, 끝 🦀')
  output.untyped_buffer = buffer_text(untyped_buf)
  output.final = request(untyped_buf)
  output.did_change = sent[DID_CHANGE]
  output.clients = #vim.lsp.get_clients({ name = 'agentls' })
end, debug.traceback)

if not ok then
  io.stderr:write('[nvim] script error: ' .. tostring(err) .. '\n')
  output.error = tostring(err)
end

-- Stop the client: agentls gets shutdown + exit and should leave with code 0.
local had_client = #vim.lsp.get_clients() > 0
for _, c in ipairs(vim.lsp.get_clients()) do
  c:stop()
end
local stopped = vim.wait(10000, function()
  return #vim.lsp.get_clients() == 0 and (output.server_exit ~= nil or not had_client)
end, 10)
output.stopped = stopped
io.stdout:write(vim.json.encode(output) .. '\n')
io.stdout:flush()
vim.cmd((ok and stopped) and 'qa!' or 'cquit 1')
