-- Driven by tests/editor_nvim.rs, three times on one workspace: `:qa!` must never lose a
-- conversation. Phase `stream`: a chat answered once, then quit with `:qa!` while the next reply
-- streams. Phase `review`: the chat opened again shows it all (the cut reply marked), and is
-- quit with `:qa!` while the agent's proposal waits for review. Phase `continue`: opened again,
-- the next message goes alone. Prints ONE JSON line on stdout.
--
--   nvim --headless --clean -l quit_and_reopen.lua <plugin dir> <agentls binary> <log file>
--        <notes file> <phase> [<chat file>]

local plugin_dir, server, log_file, notes, phase, chat_path = unpack(arg)
assert(phase, 'usage: quit_and_reopen.lua PLUGIN_DIR SERVER LOG NOTES PHASE [CHAT]')

local helpers = dofile(vim.fs.joinpath(vim.fs.dirname(arg[0]), 'helpers.lua'))
helpers.watchdog(45000)
local wait_for = helpers.waiter(15000)

local output = { phase = phase }

--- Prints the result and quits at once, as a user's `:qa!` does (no save, no waiting).
local function quit_now()
  io.stdout:write(vim.json.encode(output) .. '\n')
  io.stdout:flush()
  vim.cmd('qa!')
end

local ok, err = xpcall(function()
  helpers.setup(plugin_dir, server, log_file)
  local chat, client
  if phase == 'stream' then
    local notes_buf
    notes_buf, client = helpers.edit_attached(notes, wait_for)
    helpers.exec(client, 'agentls.openChat', nil, notes_buf, wait_for)
    wait_for('the chat to open', function()
      return vim.api.nvim_buf_get_name(0):match('%.md$') ~= nil
    end)
    chat = vim.api.nvim_get_current_buf()
    wait_for('agentls on the chat', function()
      return vim.lsp.get_clients({ bufnr = chat, name = 'agentls' })[1] ~= nil
    end)
  else
    chat, client = helpers.edit_attached(chat_path, wait_for)
  end
  output.chat_path = vim.api.nvim_buf_get_name(chat)

  local function count(needle)
    local _, n = helpers.buffer_text(chat):gsub(vim.pesc(needle), '')
    return n
  end
  local function send(message)
    vim.api.nvim_buf_set_lines(chat, -1, -1, true, { message })
    helpers.exec(client, 'agentls.send', { { uri = vim.uri_from_bufnr(chat) } }, chat, wait_for)
  end
  local interrupted = '_interrupted: agentls stopped before demo ended this turn_'

  if phase == 'stream' then
    send('read notes.txt')
    wait_for('the first reply', function()
      return count('_demo: end_turn') == 1
    end)
    send('@hang')
    wait_for('the reply that waits', function()
      return count('Waiting until you cancel') == 1
    end)
    return quit_now()
  end
  wait_for('the conversation put back', function()
    output.reopened = helpers.buffer_text(chat)
    local whole = vim.trim(helpers.buffer_text(chat)):sub(-#'## You') == '## You'
    return whole and count(interrupted) == (phase == 'review' and 1 or 2)
  end)
  if phase == 'review' then
    send('uppercase notes.txt')
    wait_for('the proposal', function()
      return count('proposes** changes to `notes.txt`') == 1
    end)
    return quit_now()
  end
  send('read notes.txt again')
  wait_for('the next reply', function()
    return count('_demo: end_turn') == 2
  end)
  output.chat = helpers.buffer_text(chat)
end, debug.traceback)

helpers.finish(ok, err, output)
