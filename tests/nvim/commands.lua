-- Driven by tests/editor_nvim.rs: the user commands of the shipped editors/nvim plugin in a real
-- Neovim (0.11+), as a user types them: :AgentChat opens a chat, :AgentSend sends what was
-- written there, :1,2AgentPrompt asks about two lines of a file (the reply goes to the chat),
-- :AgentPrompt after lines selected and <Esc> asks about those,
-- :AgentMode and :AgentModel pick from the agent's own lists (vim.ui.select answered here),
-- :AgentStatus tells the agents, :AgentReviews lists a pending proposal in the quickfix
-- list, and :AgentChats finds the first chat again after :AgentNewChat; :checkhealth agentls reports the binary and the agents; a handler of the user's own
-- (`agentls/turnChanged`) gets its notifications. Prints what happened as ONE
-- JSON line on stdout.
--
--   nvim --headless --clean -l commands.lua <plugin dir> <agentls binary> <log file> <notes file>

local plugin_dir, server, log_file, notes = unpack(arg)
assert(notes, 'usage: commands.lua PLUGIN_DIR SERVER LOG NOTES')

local helpers = dofile(vim.fs.joinpath(vim.fs.dirname(arg[0]), 'helpers.lua'))
helpers.watchdog(50000)
local wait_for = helpers.waiter(15000)

local output = { notified = {}, picked_from = {}, turns = {} }
local ok, err = xpcall(function()
  vim.notify = function(message)
    table.insert(output.notified, message)
  end
  -- The user picks the entry named by `want` (what format_item shows starts with it).
  local want
  vim.ui.select = function(items, opts, on_choice)
    local shown = {}
    for _, item in ipairs(items) do
      table.insert(shown, opts.format_item(item))
    end
    table.insert(output.picked_from, shown)
    for i, label in ipairs(shown) do
      if label:sub(1, #want) == want then
        return on_choice(items[i])
      end
    end
    on_choice(nil)
  end

  -- A handler of the user's own: the plugin asks agentls for its notification too.
  helpers.setup(plugin_dir, server, log_file, {
    handlers = {
      ['agentls/turnChanged'] = function(_, params)
        table.insert(output.turns, params.prompting)
      end,
    },
  })
  local notes_buf = helpers.edit_attached(notes, wait_for)
  output.plugin_events = vim.lsp.get_clients({ name = 'agentls' })[1].config.init_options.pluginEvents

  vim.cmd('AgentChat')
  wait_for('the chat to open', function()
    return vim.api.nvim_buf_get_name(0):match('%.md$') ~= nil
  end)
  local chat = vim.api.nvim_get_current_buf()
  wait_for('agentls on the chat', function()
    local c = vim.lsp.get_clients({ bufnr = chat, name = 'agentls' })[1]
    return c ~= nil and c.initialized
  end)
  local function count(needle)
    local _, n = helpers.buffer_text(chat):gsub(vim.pesc(needle), '')
    return n
  end

  vim.api.nvim_buf_set_lines(chat, -1, -1, true, { 'read notes.txt' })
  vim.cmd('AgentSend')
  wait_for('the first reply', function()
    return count('_demo: end_turn') == 1
  end)
  wait_for('the turn to be over', function()
    return #output.turns == 2
  end)

  -- From the file: two lines as the context.
  vim.api.nvim_set_current_buf(notes_buf)
  vim.cmd('1,2AgentPrompt what are these lines?')
  wait_for('the reply to the prompt from the file', function()
    return count('_demo: end_turn') == 2
  end)

  -- Lines 3-4 selected, visual mode left with <Esc>, then :AgentPrompt without a range: the
  -- selection just left (the cursor still in it) is the context.
  vim.api.nvim_set_current_buf(notes_buf)
  vim.api.nvim_win_set_cursor(0, { 3, 0 })
  vim.cmd('normal! Vj\27')
  vim.cmd('AgentPrompt and these?')
  wait_for('the reply to the prompt about the selection', function()
    return count('_demo: end_turn') == 3
  end)

  -- The demo agent's current session, as agentls.status has it.
  local function session()
    local c = vim.lsp.get_clients({ name = 'agentls' })[1]
    local status = c:request_sync('workspace/executeCommand', { command = 'agentls.status' }, 5000, 0)
    for _, agent in ipairs(status.result.agents) do
      for _, s in ipairs(agent.sessions or {}) do
        if s.current then
          return s
        end
      end
    end
  end
  local function model_of(s)
    for _, option in ipairs(s.configOptions or {}) do
      if option.id == 'model' then
        return option.currentValue
      end
    end
  end

  want = 'Read only'
  vim.cmd('AgentMode')
  wait_for('the mode to change', function()
    return session().mode == 'read-only'
  end)
  want = 'Careful'
  vim.cmd('AgentModel')
  wait_for('the model to change', function()
    return model_of(session()) == 'careful'
  end)
  vim.cmd('AgentStatus')
  wait_for('the status', function()
    for _, message in ipairs(output.notified) do
      if message:find('^demo') then
        output.status = message
        return true
      end
    end
  end)

  -- Before the proposal below: its showDocument must not land in the report's tab.
  vim.cmd('checkhealth agentls')
  output.health = helpers.buffer_text(vim.api.nvim_get_current_buf())

  -- A proposal, listed in the quickfix list (back in the mode that proposes).
  want = 'Ask'
  vim.cmd('AgentMode')
  wait_for('the mode to change back', function()
    return session().mode == 'ask'
  end)
  vim.api.nvim_buf_set_lines(chat, -1, -1, true, { 'uppercase notes.txt' })
  vim.api.nvim_set_current_buf(chat)
  vim.cmd('AgentSend')
  wait_for('the proposal in the diagnostics', function()
    for _, d in ipairs(vim.diagnostic.get(nil)) do
      if d.source == 'agentls' then
        return true
      end
    end
  end)
  vim.cmd('AgentReviews')
  local list = vim.fn.getqflist()
  output.reviews = #list
  output.review_file = list[1] and vim.api.nvim_buf_get_name(list[1].bufnr)
  output.chat = helpers.buffer_text(chat)

  -- A new chat (asked for from the quickfix window :AgentReviews left current), then the first
  -- one found again by its first message.
  output.new_chat_asked_from = vim.bo.buftype
  vim.cmd('AgentNewChat')
  wait_for('the new chat', function()
    local here = vim.api.nvim_get_current_buf()
    return here ~= chat and vim.api.nvim_buf_get_name(here):match('%.md$') ~= nil
  end)
  output.new_chat_is_another_file = vim.api.nvim_buf_get_name(0) ~= vim.api.nvim_buf_get_name(chat)
  want = 'read notes.txt'
  vim.cmd('AgentChats')
  wait_for('the first chat picked', function()
    return vim.api.nvim_get_current_buf() == chat
  end)
  output.chats_offered = output.picked_from[#output.picked_from]
end, debug.traceback)

helpers.finish(ok, err, output)
