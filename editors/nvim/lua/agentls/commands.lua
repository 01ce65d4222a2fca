-- User commands for agentls: the chat and a picker of earlier ones, prompts from anywhere, stop,
-- modes and models, status, and the pending reviews as a quickfix list. Each runs one agentls command
-- (workspace/executeCommand) through the agentls client of the current buffer, else any agentls
-- client. agentls itself tells every outcome and error (a message, the chat), so these only add
-- what Neovim shows better: pickers, the status, the quickfix list.

local M = {}

local has_011 = vim.fn.has('nvim-0.11') == 1
local NAME = 'agentls'

local function get_clients(filter)
  return (vim.lsp.get_clients or vim.lsp.get_active_clients)(filter)
end

--- The agentls client of `bufnr` (0 or nil: the current buffer), else any agentls client; nil,
--- and the user told, when none runs.
local function client_for(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local c = get_clients({ bufnr = bufnr, name = NAME })[1] or get_clients({ name = NAME })[1]
  if not c then
    vim.notify('agentls is not running for this buffer', vim.log.levels.WARN)
  end
  return c, bufnr
end

--- Sends the LSP request `method` with `params` to `c` (either calling convention).
local function request(c, method, params, handler, bufnr)
  if has_011 then
    c:request(method, params, handler, bufnr)
  else
    c.request(method, params, handler, bufnr)
  end
end

--- Runs agentls command `command` with `argument` (a table, or nil for none) through the agentls
--- client of `bufnr` (default: the current buffer, else any agentls client); `on_result` gets
--- its result. Errors are agentls's to tell (it does, once). Neovim 0.11's `client:exec_cmd`
--- sends it where it exists (`client.request` on older ones).
function M.run(command, argument, on_result, bufnr)
  local c
  c, bufnr = client_for(bufnr)
  if not c then
    return
  end
  local arguments = argument and { argument } or {}
  local function handler(err, result)
    if not err and on_result then
      on_result(result)
    end
  end
  if c.exec_cmd then
    c:exec_cmd({ title = command, command = command, arguments = arguments }, { bufnr = bufnr }, handler)
  else
    request(c, 'workspace/executeCommand', { command = command, arguments = arguments }, handler, bufnr)
  end
end

--- The workspace's chats (agentls lists them as workspace symbols, most recent first), to pick
--- one and open it.
local function pick_chat()
  local c, bufnr = client_for(0)
  if not c then
    return
  end
  request(c, 'workspace/symbol', { query = '' }, function(err, symbols)
    if err or not symbols or #symbols == 0 then
      vim.notify('agentls: no chats in this workspace yet (:AgentChat starts one)')
      return
    end
    vim.ui.select(symbols, {
      prompt = 'Chat',
      format_item = function(symbol)
        return symbol.name .. ' (' .. (symbol.containerName or 'chat') .. ')'
      end,
    }, function(symbol)
      if symbol then
        -- Placed as agentls's own showDocument of a chat is (a split on the right).
        local params = { uri = symbol.location.uri, takeFocus = true }
        require('agentls').show_document(nil, params, { client_id = c.id, method = 'window/showDocument' })
      end
    end)
  end, bufnr)
end

--- The agent `name` (or the default one) in `agentls.status`, and its current session.
local function agent_in(status, name)
  for _, agent in ipairs(status.agents or {}) do
    if ((name == nil or name == '') and agent.default) or agent.name == name then
      for _, session in ipairs(agent.sessions or {}) do
        if session.current then
          return agent, session
        end
      end
      return agent, nil
    end
  end
end

--- One line per agent: its name, whether it runs, its mode and its turn.
function M.describe(status)
  local lines = {}
  for _, agent in ipairs(status.agents or {}) do
    local _, session = agent_in(status, agent.name)
    local parts = { agent.name .. (agent.default and ' (default)' or ''), agent.state or '?' }
    if session then
      table.insert(parts, 'mode ' .. tostring(session.mode))
      table.insert(parts, session.state)
    end
    table.insert(lines, table.concat(parts, ' · '))
  end
  return table.concat(lines, '\n')
end

--- The values of the select option of `session` that picks its model (id or category
--- `model`), and the option's id.
local function model_choices(session)
  for _, option in ipairs((session and session.configOptions) or {}) do
    if option.type == 'select' and (option.id == 'model' or option.category == 'model') then
      local values = {}
      for _, entry in ipairs(option.options or {}) do
        for _, choice in ipairs(entry.options or { entry }) do
          table.insert(values, choice)
        end
      end
      return option.id, values
    end
  end
end

--- The lines of the visual selection just left in the current buffer, while the cursor is still
--- in them: `first, last` (1-based), else nil. Leaving visual mode to type `:AgentPrompt` (with
--- <Esc>, or after `y`) keeps meaning those lines; once the cursor moves away it does not.
local function last_selection()
  local first, last = vim.fn.line("'<"), vim.fn.line("'>")
  local cursor = vim.fn.line('.')
  if first == 0 or last == 0 or cursor < first or cursor > last then
    return nil
  end
  return first, last
end

local function prompt(opts)
  local first, last
  if opts.range > 0 then
    first, last = opts.line1, opts.line2
  elseif vim.bo.buftype == '' and vim.api.nvim_buf_get_name(0) ~= '' then
    first, last = last_selection()
  end
  local function send(text)
    if not text or text == '' then
      return
    end
    local argument = { text = text }
    if first then
      -- The lines of the range, whole, as the context.
      argument.uri = vim.uri_from_bufnr(0)
      argument.range = {
        start = { line = first - 1, character = 0 },
        ['end'] = { line = last, character = 0 },
      }
    end
    M.run('agentls.prompt', argument)
  end
  if opts.args ~= '' then
    send(opts.args)
  else
    vim.ui.input({ prompt = 'Ask the agent: ' }, send)
  end
end

local function pick_mode(opts)
  M.run('agentls.status', nil, function(status)
    local agent, session = agent_in(status, opts.args)
    local modes = session and session.modes and session.modes.availableModes or {}
    if not agent or #modes == 0 then
      vim.notify('agentls: no modes to pick from (no session yet?)', vim.log.levels.WARN)
      return
    end
    vim.ui.select(modes, {
      prompt = agent.name .. "'s mode",
      format_item = function(mode)
        return mode.name .. (mode.id == session.mode and ' (current)' or '')
      end,
    }, function(mode)
      if mode then
        M.run('agentls.setMode', { agent = agent.name, mode = mode.id })
      end
    end)
  end)
end

local function pick_model(opts)
  M.run('agentls.status', nil, function(status)
    local agent, session = agent_in(status, opts.args)
    local option, values = model_choices(session)
    if not agent or not option then
      vim.notify('agentls: the agent offers no model to pick (no session yet?)', vim.log.levels.WARN)
      return
    end
    vim.ui.select(values, {
      prompt = agent.name .. "'s model",
      format_item = function(choice)
        return choice.name or choice.value
      end,
    }, function(choice)
      if choice then
        M.run('agentls.setOption', { agent = agent.name, option = option, value = choice.value })
      end
    end)
  end)
end

--- agentls's pending changes, every buffer's, as the quickfix list.
local function reviews()
  local items = {}
  for _, diagnostic in ipairs(vim.diagnostic.get(nil)) do
    if diagnostic.source == NAME then
      table.insert(items, diagnostic)
    end
  end
  vim.fn.setqflist({}, ' ', { title = 'agentls reviews', items = vim.diagnostic.toqflist(items) })
  if #items == 0 then
    vim.notify('agentls: no pending changes')
  else
    vim.cmd('copen')
  end
end

--- The commands, by name: what each does, how it takes its arguments, and its function.
M.commands = {
  AgentChat = {
    desc = "Open the agent's latest chat of this workspace (the default agent's), or a new one",
    nargs = '?',
    run = function(opts)
      M.run('agentls.openChat', opts.args ~= '' and { agent = opts.args } or nil)
    end,
  },
  AgentNewChat = {
    desc = 'Open a new chat with an agent (the default one)',
    nargs = '?',
    run = function(opts)
      M.run('agentls.openChat', { agent = opts.args ~= '' and opts.args or nil, new = true })
    end,
  },
  AgentChats = { desc = "Pick one of this workspace's chats, by its first message", run = pick_chat },
  AgentSend = {
    desc = 'Send what you wrote in this chat',
    run = function()
      M.run('agentls.send', { uri = vim.uri_from_bufnr(0) })
    end,
  },
  AgentPrompt = {
    desc = 'Ask the agent (the range, or the selection just left, is the context); without text, asks for it',
    nargs = '*',
    range = true,
    run = prompt,
  },
  AgentCancel = {
    desc = "Stop the agent's turn",
    nargs = '?',
    run = function(opts)
      M.run('agentls.cancel', opts.args ~= '' and { agent = opts.args } or nil)
    end,
  },
  AgentUndoTurn = {
    desc = "Undo a turn's file changes as a review (the newest turn, or the number given)",
    nargs = '?',
    run = function(opts)
      M.run('agentls.undoTurn', opts.args ~= '' and { turn = tonumber(opts.args) } or nil)
    end,
  },
  AgentRedoTurn = {
    desc = 'Put back what undoing a turn took away, as a review',
    nargs = '?',
    run = function(opts)
      M.run('agentls.redoTurn', opts.args ~= '' and { turn = tonumber(opts.args) } or nil)
    end,
  },
  AgentMode = { desc = "Pick the agent's mode", nargs = '?', run = pick_mode },
  AgentModel = { desc = "Pick the agent's model", nargs = '?', run = pick_model },
  AgentStatus = {
    desc = 'Show the agents and their sessions',
    run = function()
      M.run('agentls.status', nil, function(status)
        vim.notify(M.describe(status))
      end)
    end,
  },
  AgentReviews = { desc = "List agentls's pending changes in the quickfix list", run = reviews },
}

--- Defines the user commands.
function M.setup()
  for name, command in pairs(M.commands) do
    vim.api.nvim_create_user_command(name, command.run, {
      desc = command.desc,
      nargs = command.nargs or 0,
      range = command.range,
    })
  end
end

return M
