-- agentls for Neovim (0.10+): starts the agentls language server for your files (0.11+ through
-- vim.lsp.config/vim.lsp.enable, 0.10 through vim.lsp.start from a FileType autocmd), tells it
-- what you select (`agentls/didChangeSelection`) and what your other language servers report
-- (`agentls/didChangeDiagnostics`), and sets up the rest: user commands (agentls/commands.lua),
-- reviews inline (agentls/reviews.lua), buffers taken as saved once the disk caught up
-- (agentls/disk.lua), and handlers that place chats and files, and keep agentls's messages and
-- edits from stopping you at "Press ENTER".
--
--   require('agentls').setup({})   -- with editors/nvim on the runtime path (see README.md)

local M = {}

local uv = vim.uv or vim.loop
local has_011 = vim.fn.has('nvim-0.11') == 1
local NAME = 'agentls'
local METHOD = 'agentls/didChangeSelection'

--- The options `setup` understands, with their defaults.
M.defaults = {
  -- How to run the server.
  cmd = { 'agentls' },
  -- Extra environment for the server process.
  cmd_env = nil,
  -- File types to attach to; nil attaches to every file buffer, whatever its type.
  filetypes = nil,
  -- Files or directories that mark the workspace root (sent as the workspace folder).
  root_markers = { '.git' },
  -- Passed through to the client unchanged.
  init_options = nil,
  settings = nil,
  flags = nil,
  handlers = nil,
  -- The selection notifier: false turns it off; debounce_ms waits for the selection to settle.
  selection = { debounce_ms = 100 },
  -- Forward the other servers' diagnostics (so agents see them): false turns it off.
  diagnostics = { debounce_ms = 200 },
  -- The user commands (:AgentChat, :AgentPrompt, …; see README.md): false leaves them out.
  commands = true,
  -- A buffer whose text is what its file holds (an agent wrote the file, agentls brought the
  -- buffer in line) is taken as saved: no 'modified', no "changed since reading it" at :w; one
  -- whose file an agent wrote under your unsaved edits keeps them, without that question.
  disk_sync = true,
  -- Agents' pending changes shown inline, with keys to accept or reject them (see
  -- lua/agentls/reviews.lua for the keys' defaults): false leaves only agentls's diagnostics.
  reviews = {},
}

local function get_clients(filter)
  return (vim.lsp.get_clients or vim.lsp.get_active_clients)(filter)
end

local function notify(client, method, params)
  if has_011 then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

--- The attached agentls client of `bufnr`, if any.
local function client_of(bufnr)
  return get_clients({ bufnr = bufnr, name = NAME })[1]
end

-- Position math ------------------------------------------------------------------------------

--- `byte_col` (0-based, at a character boundary) of `line`, in the client's offset encoding.
local function to_encoding(line, byte_col, encoding)
  byte_col = math.min(byte_col, #line)
  if encoding == 'utf-8' then
    return byte_col
  end
  if has_011 then
    return vim.str_utfindex(line, encoding, byte_col, false)
  end
  local utf32, utf16 = vim.str_utfindex(line, byte_col)
  return encoding == 'utf-32' and utf32 or utf16
end

local function line_at(bufnr, row)
  return vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
end

--- The byte just after the character (with its composing characters) that starts at `col`.
local function char_end(line, col)
  if col >= #line then
    return #line
  end
  return col + #vim.fn.strpart(line, col, 1, 1)
end

-- Visual and select modes: charwise, linewise, blockwise (CTRL-V is \22, CTRL-S is \19).
local VISUAL = { v = true, V = true, ['\22'] = true, s = true, S = true, ['\19'] = true }

local function is_visual(mode)
  return VISUAL[mode:sub(1, 1)] == true
end

--- The selection of the current window as an LSP range, in (0-based row, byte column) pairs.
--- Visual mode covers whole characters up to and including the one under the far end; a
--- linewise selection covers whole lines with their line breaks. A block selection is reported
--- as the characterwise span between its corners.
local function current_span(bufnr, mode)
  local cursor = vim.api.nvim_win_get_cursor(0) -- {1-based row, byte col}
  if not is_visual(mode) then
    local row, col = cursor[1] - 1, cursor[2]
    return row, col, row, col
  end
  local v, c = vim.fn.getpos('v'), vim.fn.getpos('.')
  local a = { v[2] - 1, v[3] - 1 }
  local b = { c[2] - 1, c[3] - 1 }
  local cursor_last = true
  if a[1] > b[1] or (a[1] == b[1] and a[2] > b[2]) then
    a, b, cursor_last = b, a, false
  end
  local first = mode:sub(1, 1)
  if first == 'V' or first == 'S' then
    local last_row = vim.api.nvim_buf_line_count(bufnr) - 1
    if b[1] == last_row and not vim.bo[bufnr].eol then
      return a[1], 0, b[1], #line_at(bufnr, b[1])
    end
    return a[1], 0, b[1] + 1, 0
  end
  local line = line_at(bufnr, b[1])
  -- `$` in visual mode (the cursor wants the end of the line) and an empty line select the break.
  local to_eol = cursor_last and vim.fn.getcurpos()[5] >= 2147483647
  if b[2] >= #line or to_eol then
    if b[1] + 1 < vim.api.nvim_buf_line_count(bufnr) or vim.bo[bufnr].eol then
      return a[1], a[2], b[1] + 1, 0
    end
    return a[1], a[2], b[1], #line
  end
  return a[1], a[2], b[1], char_end(line, b[2])
end

--- `agentls/didChangeSelection` params for the current window and the id of the client to send
--- them to, or nil when agentls is not attached to the window's buffer.
function M.selection_params()
  local bufnr = vim.api.nvim_get_current_buf()
  local client = client_of(bufnr)
  if not client then
    return nil
  end
  local encoding = client.offset_encoding or 'utf-16'
  local srow, scol, erow, ecol = current_span(bufnr, vim.fn.mode())
  local function position(row, col)
    return { line = row, character = to_encoding(line_at(bufnr, row), col, encoding) }
  end
  return {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    selection = { start = position(srow, scol), ['end'] = position(erow, ecol) },
  }, client.id
end

-- The selection notifier ---------------------------------------------------------------------

local pending -- the latest captured selection, not sent yet
local last_sent -- the params sent last, to skip repeats
local timer

local function flush()
  if timer then
    timer:stop()
  end
  local p = pending
  pending = nil
  if not p or vim.deep_equal(p.params, last_sent) then
    return
  end
  local client = vim.lsp.get_client_by_id(p.client_id)
  if client then
    notify(client, METHOD, p.params)
    last_sent = p.params
  end
end

local function capture(debounce_ms)
  local bufnr = vim.api.nvim_get_current_buf()
  if pending and pending.bufnr ~= bufnr then
    -- The user left that buffer: what it had selected last is final.
    flush()
  end
  local params, client_id = M.selection_params()
  if not params then
    return
  end
  pending = { params = params, client_id = client_id, bufnr = bufnr }
  if debounce_ms <= 0 then
    return flush()
  end
  timer = timer or uv.new_timer()
  timer:stop()
  timer:start(debounce_ms, 0, vim.schedule_wrap(flush))
end

local function enable_selection(opts)
  local debounce_ms = opts.debounce_ms or M.defaults.selection.debounce_ms
  local group = vim.api.nvim_create_augroup('agentls.selection', { clear = true })
  vim.api.nvim_create_autocmd({ 'CursorMoved', 'BufEnter' }, {
    group = group,
    callback = function()
      capture(debounce_ms)
    end,
  })
  vim.api.nvim_create_autocmd('ModeChanged', {
    group = group,
    callback = function()
      -- Leaving visual mode (after `y`, `d`, <Esc>, `:`) must not lose the selection still
      -- waiting for its debounce: that is the one the user meant.
      local event = vim.v.event or {}
      local old, new = event.old_mode or '', event.new_mode or vim.fn.mode()
      if is_visual(old) and pending then
        flush()
      end
      -- The command line is not a place in the buffer: typing `:AgentPrompt …` after a
      -- selection must leave that selection the one agentls holds, however slowly it is typed.
      -- `:` in visual mode goes through normal mode first (v -> n -> c): the cursor captured on
      -- the way is dropped, not sent 100 ms into the typing.
      if new:sub(1, 1) == 'c' then
        if pending and pending.left_visual then
          if timer then
            timer:stop()
          end
          pending = nil
        end
        return
      end
      capture(debounce_ms)
      if is_visual(old) and pending then
        pending.left_visual = true
      end
    end,
  })
end

-- Forwarding diagnostics ---------------------------------------------------------------------

local DIAGNOSTICS = 'agentls/didChangeDiagnostics'
local SEVERITY = {
  [vim.diagnostic.severity.ERROR] = 1,
  [vim.diagnostic.severity.WARN] = 2,
  [vim.diagnostic.severity.INFO] = 3,
  [vim.diagnostic.severity.HINT] = 4,
}
local forwarded = {} -- bufnr -> the last list sent
local forward_timers = {} -- bufnr -> timer

--- The diagnostics of `bufnr` from everything but agentls itself, as LSP diagnostics in the
--- client's offset encoding.
function M.diagnostics_params(bufnr)
  local client = client_of(bufnr)
  if not client then
    return nil
  end
  local encoding = client.offset_encoding or 'utf-16'
  local list = {}
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    if d.source ~= NAME then
      local end_lnum = d.end_lnum or d.lnum
      table.insert(list, {
        range = {
          start = { line = d.lnum, character = to_encoding(line_at(bufnr, d.lnum), d.col, encoding) },
          ['end'] = {
            line = end_lnum,
            character = to_encoding(line_at(bufnr, end_lnum), d.end_col or d.col, encoding),
          },
        },
        severity = SEVERITY[d.severity],
        message = d.message,
        source = d.source,
        code = d.code,
      })
    end
  end
  return { uri = vim.uri_from_bufnr(bufnr), diagnostics = list }, client
end

local function forward(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  local params, client = M.diagnostics_params(bufnr)
  if params and not vim.deep_equal(params.diagnostics, forwarded[bufnr]) then
    notify(client, DIAGNOSTICS, params)
    forwarded[bufnr] = params.diagnostics
  end
end

local function enable_diagnostics(debounce_ms)
  local group = vim.api.nvim_create_augroup('agentls.diagnostics', { clear = true })
  vim.api.nvim_create_autocmd('DiagnosticChanged', {
    group = group,
    callback = function(args)
      local bufnr = args.buf
      local timer = forward_timers[bufnr] or uv.new_timer()
      forward_timers[bufnr] = timer
      timer:stop()
      timer:start(debounce_ms, 0, vim.schedule_wrap(function()
        forward(bufnr)
      end))
    end,
  })
  vim.api.nvim_create_autocmd('BufWipeout', {
    group = group,
    callback = function(args)
      forwarded[args.buf] = nil
      if forward_timers[args.buf] then
        forward_timers[args.buf]:close()
        forward_timers[args.buf] = nil
      end
    end,
  })
end

-- Handlers: where documents open, edits, messages, inlay hints --------------------------------

--- Whether `bufnr` (a loaded buffer) or the file at `uri` is an agentls chat document: its
--- first line is `# Chat with <agent>`.
local function is_chat(uri, bufnr)
  local first
  if bufnr and vim.api.nvim_buf_is_loaded(bufnr) then
    first = vim.api.nvim_buf_get_lines(bufnr, 0, 1, false)[1]
  else
    local file = io.open(vim.uri_to_fname(uri), 'r')
    first = file and file:read('*l')
    if file then
      file:close()
    end
  end
  return first ~= nil and first:match('^# Chat with ') ~= nil
end

--- Whether the current window holds nothing worth keeping in view (the empty [No Name]).
local function window_is_empty()
  local bufnr = vim.api.nvim_get_current_buf()
  return vim.api.nvim_buf_get_name(bufnr) == ''
    and not vim.bo[bufnr].modified
    and vim.api.nvim_buf_line_count(bufnr) == 1
    and vim.api.nvim_buf_get_lines(bufnr, 0, 1, false)[1] == ''
end

--- Moves to a window of this tab holding a file when the current one holds the quickfix list,
--- help or a terminal: a document shown from there would replace it (and Neovim's handler fails
--- in some, E348).
local function leave_special_window()
  if vim.bo.buftype == '' then
    return
  end
  for _, win in ipairs(vim.api.nvim_tabpage_list_wins(0)) do
    if vim.bo[vim.api.nvim_win_get_buf(win)].buftype == '' then
      vim.api.nvim_set_current_win(win)
      return
    end
  end
end

--- `window/showDocument`, placed the way a chat reads best: a document already in a window is
--- shown there; a chat opens in a split on the right (the code stays in view); a file shown
--- from a chat (a proposal, a link) goes to the window before, not over the chat. Neovim's own
--- handler then opens it and moves the cursor.
local function show_document(err, params, ctx, config)
  if params and params.uri and not params.external and params.takeFocus ~= false then
    leave_special_window()
    local bufnr = vim.uri_to_bufnr(params.uri)
    if #vim.fn.win_findbuf(bufnr) == 0 and not window_is_empty() then
      local here = vim.api.nvim_get_current_buf()
      if is_chat(params.uri, bufnr) then
        vim.cmd('botright vsplit')
      elseif is_chat(vim.uri_from_bufnr(here), here) then
        local before = vim.fn.win_getid(vim.fn.winnr('#'))
        local there = before ~= 0 and vim.api.nvim_win_get_buf(before)
        if there and before ~= vim.api.nvim_get_current_win() and not is_chat(vim.uri_from_bufnr(there), there) then
          vim.api.nvim_set_current_win(before)
        else
          vim.cmd('topleft vsplit')
        end
      end
    end
  end
  return vim.lsp.handlers['window/showDocument'](err, params, ctx, config)
end
M.show_document = show_document

--- Whether buffers agentls edited are taken as saved once they match their file (setup's
--- `disk_sync`).
local disk_sync = true

--- `workspace/applyEdit`, as Neovim's own handler but without printing the edit's label:
--- agentls labels every edit (each streamed chunk of a chat reply is one), and a print per edit
--- piles up into "Press ENTER" prompts.
--- Whether nothing follows the last `## You` heading of the chat in `bufnr`: no draft of the
--- user's that only the buffer holds.
local function chat_has_no_draft(bufnr)
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  for i = #lines, 1, -1 do
    if lines[i] == '## You' then
      return true
    end
    if lines[i]:match('%S') then
      return false
    end
  end
  return false
end

--- After agentls's own edit of a chat, its buffer is not "modified" unless the user has a
--- draft in it: agentls keeps the conversation (and puts back what was not saved when the chat
--- is opened again), so leaving Neovim does not stop on the chat.
local function chat_needs_no_save(uris)
  for _, uri in ipairs(uris) do
    local bufnr = vim.uri_to_bufnr(uri)
    if vim.api.nvim_buf_is_loaded(bufnr) and is_chat(uri, bufnr) and chat_has_no_draft(bufnr) then
      vim.bo[bufnr].modified = false
    end
  end
end

local function apply_edit(_, params, ctx)
  local client = vim.lsp.get_client_by_id(ctx.client_id)
  if not client or not params or not params.edit then
    return { applied = false, failureReason = 'no edit or no client' }
  end
  -- Windows whose cursor is on the last line of a chat follow the reply as it streams in.
  local following = {}
  local typing = vim.fn.mode() ~= 'n'
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    local bufnr = vim.api.nvim_win_get_buf(win)
    local at_end = vim.api.nvim_win_get_cursor(win)[1] == vim.api.nvim_buf_line_count(bufnr)
    -- Not the window you are typing in.
    local busy = typing and win == vim.api.nvim_get_current_win()
    if at_end and not busy and is_chat(nil, bufnr) then
      table.insert(following, win)
    end
  end
  local ok, err = pcall(vim.lsp.util.apply_workspace_edit, params.edit, client.offset_encoding or 'utf-16')
  for _, win in ipairs(following) do
    if vim.api.nvim_win_is_valid(win) then
      pcall(vim.api.nvim_win_set_cursor, win, { vim.api.nvim_buf_line_count(vim.api.nvim_win_get_buf(win)), 0 })
    end
  end
  local uris = vim.tbl_keys(params.edit.changes or {})
  for _, change in ipairs(params.edit.documentChanges or {}) do
    if change.textDocument then
      table.insert(uris, change.textDocument.uri)
    end
  end
  if ok then
    chat_needs_no_save(uris)
  end
  if ok and disk_sync then
    -- An agent's change that is on disk already leaves the buffer as if saved.
    for _, uri in ipairs(uris) do
      local bufnr = vim.uri_to_bufnr(uri)
      -- A chat is agentls's own: no agent writes it to disk behind the buffer.
      if vim.api.nvim_buf_is_loaded(bufnr) and not is_chat(uri, bufnr) then
        require('agentls.disk').after_edit(bufnr)
      end
    end
  end
  return { applied = ok, failureReason = not ok and tostring(err) or nil }
end

--- `text` on one line that fits in `width` cells, cut with an ellipsis.
local function fit(text, width)
  text = text:gsub('%s*\n%s*', ' ')
  if vim.fn.strdisplaywidth(text) <= width then
    return text
  end
  local cut = vim.fn.strcharpart(text, 0, width - 1)
  while vim.fn.strdisplaywidth(cut) > width - 1 do
    cut = vim.fn.strcharpart(cut, 0, vim.fn.strchars(cut) - 1)
  end
  return cut .. '…'
end

local LEVELS = { vim.log.levels.ERROR, vim.log.levels.WARN, vim.log.levels.INFO, vim.log.levels.DEBUG }

--- Information messages waiting to be shown (those that arrive together go out as one line).
local queued_info = {}

--- `window/showMessage` through vim.notify: errors and warnings whole, information on one
--- line that fits the command line (the whole text is in the chat and in the LSP log; several
--- arriving together share the line), so a turn's messages never stop you at "Press ENTER".
local function show_message(_, params)
  if not params or not params.message then
    return
  end
  local level = LEVELS[params.type] or vim.log.levels.INFO
  local text = params.message
  if not vim.startswith(text, 'agentls') then
    text = 'agentls: ' .. text
  end
  if level > vim.log.levels.INFO then
    vim.notify(text, level)
    return
  end
  table.insert(queued_info, text)
  if #queued_info == 1 then
    vim.schedule(function()
      local line = table.concat(queued_info, ' · ')
      queued_info = {}
      vim.notify(fit(line, math.max(vim.v.echospace, 20)), vim.log.levels.INFO)
    end)
  end
end

--- Neovim's per-buffer inlay hint state (`bufstates` in vim/lsp/inlay_hint.lua), or nil.
local function inlay_hint_states()
  local on_inlayhint = vim.lsp.inlay_hint and vim.lsp.inlay_hint.on_inlayhint
  if type(on_inlayhint) ~= 'function' then
    return nil
  end
  for i = 1, 50 do
    local name, value = debug.getupvalue(on_inlayhint, i)
    if name == nil then
      return nil
    elseif name == 'bufstates' and type(value) == 'table' then
      return value
    end
  end
end

--- `textDocument/inlayHint` replies, as Neovim's own handler, then drawn. Neovim 0.10 and 0.11
--- mark each line's hints drawn at a buffer version: a screen redrawn between a
--- `workspace/inlayHint/refresh` and its reply marks every line drawn (with no hints yet), and
--- the reply, at the same version, is then never drawn. So the lines are marked undrawn again
--- and redrawn.
local function inlay_hints(err, result, ctx, config)
  local default = vim.lsp.handlers['textDocument/inlayHint']
  local value = default and default(err, result, ctx, config)
  local bufnr = ctx and ctx.bufnr
  if not err and bufnr and vim.api.nvim_buf_is_valid(bufnr) then
    local states = inlay_hint_states()
    local state = states and rawget(states, bufnr)
    if type(state) == 'table' and type(rawget(state, 'applied')) == 'table' then
      rawset(state, 'applied', {})
    end
    if vim.api.nvim__redraw then
      pcall(vim.api.nvim__redraw, { buf = bufnr, valid = false })
    end
  end
  return value
end

--- Handlers the plugin adds to the client (the user's own `handlers` win).
local plugin_handlers = {}

-- Starting the client ------------------------------------------------------------------------

--- `init_options` asking agentls for the `agentls/*` notifications `handlers` handle (it sends
--- none unasked; the user's own `pluginEvents` wins).
local function with_plugin_events(init_options, handlers)
  local events = {}
  for method in pairs(handlers) do
    local event = method:match('^agentls/(%w+)$')
    if event then
      table.insert(events, event)
    end
  end
  if #events == 0 then
    return init_options
  end
  table.sort(events)
  return vim.tbl_extend('force', { pluginEvents = events }, init_options or {})
end

local function client_config(opts)
  local handlers = vim.tbl_extend('force', plugin_handlers, opts.handlers or {})
  return {
    cmd = opts.cmd,
    cmd_env = opts.cmd_env,
    init_options = with_plugin_events(opts.init_options, handlers),
    settings = opts.settings,
    flags = opts.flags,
    handlers = handlers,
  }
end

--- The file `bufnr` holds, or nil for a buffer that is not a file (no name, a `scheme://` view,
--- a special buftype): agentls only serves files.
local function file_of(bufnr)
  if vim.bo[bufnr].buftype ~= '' then
    return nil
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == '' or (name:match('^%a[%w+.-]*://') and not name:match('^file://')) then
    return nil
  end
  return name
end

--- The directory holding one of `markers` above `file`, or nil.
local function root_of(file, markers)
  local marker = vim.fs.find(markers or {}, { upward = true, path = vim.fs.dirname(file) })[1]
  return marker and vim.fs.dirname(marker) or nil
end

--- The running client's root for an agentls chat document (kept outside the repository, in
--- agentls's state dir), or nil for any other file: a chat belongs to the server that made it,
--- and a second server with a root of its own would not know it.
local function chat_root(file)
  if not file:find('/agentls/chats/', 1, true) then
    return nil
  end
  local client = vim.lsp.get_clients({ name = NAME })[1]
  return client and client.root_dir
end

--- Starts (or reuses) the client for `bufnr` directly, without vim.lsp.enable.
local function start_in(bufnr, opts)
  local file = file_of(bufnr)
  if not file then
    return
  end
  -- On 0.11 start from the resolved vim.lsp.config, so later vim.lsp.config('agentls', …)
  -- calls apply here too.
  local config = has_011 and vim.deepcopy(vim.lsp.config[NAME]) or client_config(opts)
  config.name = NAME
  config.root_dir = chat_root(file) or root_of(file, opts.root_markers)
  vim.lsp.start(config, { bufnr = bufnr })
end

--- Starts agentls for matching buffers; reports selections and forwards diagnostics unless
--- `opts.selection` / `opts.diagnostics` is false.
function M.setup(opts)
  opts = vim.tbl_extend('keep', opts or {}, M.defaults)
  disk_sync = opts.disk_sync ~= false
  if disk_sync then
    require('agentls.disk').setup()
  else
    vim.api.nvim_create_augroup('agentls.disk', { clear = true })
  end
  plugin_handlers = {
    ['window/showDocument'] = show_document,
    ['workspace/applyEdit'] = apply_edit,
    ['window/showMessage'] = show_message,
    ['textDocument/inlayHint'] = inlay_hints,
  }
  if disk_sync then
    plugin_handlers['agentls/diskInBuffer'] = require('agentls.disk').on_disk_in_buffer
  end
  if opts.reviews ~= false then
    plugin_handlers = vim.tbl_extend('force', plugin_handlers, require('agentls.reviews').setup(opts.reviews))
  end
  local group = vim.api.nvim_create_augroup('agentls.start', { clear = true })
  if has_011 then
    local config = client_config(opts)
    config.filetypes = opts.filetypes
    -- A function rather than root_markers: not calling on_dir keeps the client off buffers that
    -- are not files (with filetypes = nil, even the empty [No Name] buffer would match).
    config.root_dir = function(bufnr, on_dir)
      local file = file_of(bufnr)
      if file then
        on_dir(chat_root(file) or root_of(file, opts.root_markers))
      end
    end
    vim.lsp.config(NAME, config)
    vim.lsp.enable(NAME)
  else
    vim.api.nvim_create_autocmd('FileType', {
      group = group,
      pattern = opts.filetypes or '*',
      callback = function(args)
        start_in(args.buf, opts)
      end,
    })
  end
  if opts.filetypes == nil then
    -- FileType never fires for a file Neovim has no type for; attach to those as well.
    vim.api.nvim_create_autocmd({ 'BufReadPost', 'BufNewFile' }, {
      group = group,
      callback = function(args)
        vim.schedule(function()
          if vim.api.nvim_buf_is_valid(args.buf) and vim.bo[args.buf].filetype == '' then
            start_in(args.buf, opts)
          end
        end)
      end,
    })
  end
  if opts.selection ~= false then
    enable_selection(opts.selection or {})
  end
  if opts.diagnostics ~= false then
    local diagnostics = opts.diagnostics or {}
    enable_diagnostics(diagnostics.debounce_ms or M.defaults.diagnostics.debounce_ms)
  end
  if opts.commands ~= false then
    require('agentls.commands').setup()
  end
end

return M
