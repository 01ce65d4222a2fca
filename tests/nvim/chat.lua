-- Driven by tests/editor_nvim.rs: a conversation in a chat document in a real Neovim (0.11+)
-- with the shipped editors/nvim config and nothing else. `agentls.openChat` makes the chat and
-- Neovim's own showDocument handler opens it; agentls attaches to it (the same server, though
-- the chat lives outside the repository); the user writes under `## You`, runs the code action
-- *Send to demo*, and the reply streams into the buffer; a second message goes with
-- `agentls.send`, and two more that stream slowly (whole lines, then lines in pieces). Prints
-- what happened as ONE JSON line on stdout.
--
--   nvim --headless --clean -l chat.lua <plugin dir> <agentls binary> <log file> <notes file>

local plugin_dir, server, log_file, notes = unpack(arg)
assert(notes, 'usage: chat.lua PLUGIN_DIR SERVER LOG NOTES')

local helpers = dofile(vim.fs.joinpath(vim.fs.dirname(arg[0]), 'helpers.lua'))
helpers.watchdog(45000)
local wait_for = helpers.waiter(15000)

local output = {}
local ok, err = xpcall(function()
  helpers.setup(plugin_dir, server, log_file)
  local notes_buf, client = helpers.edit_attached(notes, wait_for)

  local function exec(command, arguments, bufnr)
    local done
    client:exec_cmd({ title = command, command = command, arguments = arguments }, { bufnr = bufnr }, function(e)
      done = { err = e }
    end)
    wait_for('command ' .. command, function()
      return done ~= nil
    end)
    assert(not done.err, vim.inspect(done.err))
  end

  exec('agentls.openChat', nil, notes_buf)
  wait_for('the chat to open', function()
    return vim.api.nvim_buf_get_name(0):match('%.md$') ~= nil
  end)
  local chat = vim.api.nvim_get_current_buf()
  wait_for('agentls on the chat', function()
    local c = vim.lsp.get_clients({ bufnr = chat, name = 'agentls' })[1]
    return c ~= nil and c.initialized
  end)
  output.servers = #vim.lsp.get_clients({ name = 'agentls' })
  output.filetype = vim.bo[chat].filetype

  local function chat_text()
    return helpers.buffer_text(chat)
  end
  local function count(needle)
    local _, n = chat_text():gsub(vim.pesc(needle), '')
    return n
  end
  -- The user writes a line after the blank line under `## You`.
  local function write(message)
    vim.api.nvim_buf_set_lines(chat, -1, -1, true, { message })
  end

  write('read notes.txt')
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(chat) },
    range = { start = { line = 0, character = 0 }, ['end'] = { line = 0, character = 0 } },
    context = { diagnostics = {} },
  }
  local response = client:request_sync('textDocument/codeAction', params, 10000, chat)
  assert(response and not response.err, vim.inspect(response))
  local send
  for _, action in ipairs(response.result or {}) do
    if action.title == 'Send to demo' then
      send = action
    end
  end
  assert(send, 'no Send to demo in ' .. vim.inspect(response.result))
  exec(send.command.command, send.command.arguments, chat)
  wait_for('the first reply', function()
    return count('_demo: end_turn') == 1
  end)

  -- The next message, sent with `agentls.send`, and its reply (the `replies`th).
  local function send_next(message, replies)
    write(message)
    exec('agentls.send', { { uri = vim.uri_from_bufnr(chat) } }, chat)
    wait_for('reply ' .. replies, function()
      return count('_demo: end_turn') == replies
    end)
  end
  send_next('read notes.txt again', 2)
  -- Replies that stream for a while: whole lines apart, then lines in two pieces, each piece
  -- reaching the buffer on its own.
  send_next('@flood 3 @pace 300', 3)
  send_next('@flood 2 @pace 300 @split', 4)
  output.chat = chat_text()
  -- agentls keeps the conversation: the chat needs no save, unless the user writes a draft.
  output.modified_after_reply = vim.bo[chat].modified
  write('a draft')
  output.modified_with_draft = vim.bo[chat].modified
end, debug.traceback)

helpers.finish(ok, err, output)
