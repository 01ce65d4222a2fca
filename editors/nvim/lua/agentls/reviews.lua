-- agentls's pending reviews shown in the buffer: each open change of an agent's proposal as
-- virtual lines (extmarks) with its new text under the old lines, which are highlighted, and a
-- label saying what the change is and which keys decide it; buffer-local keymaps that accept or
-- reject the change under the cursor or all of them (they run agentls's own commands,
-- agentls.accept / agentls.reject, as its code actions do); and `:AgentDiff`, the proposal beside
-- the buffer in diff mode. Fed by the `agentls/reviewChanged` notification, per file:
-- `{uri, path, reviews}` (an empty list: none left there).

local M = {}

local NAME = 'agentls'
local ns = vim.api.nvim_create_namespace('agentls.reviews')
local has_011 = vim.fn.has('nvim-0.11') == 1

--- The options `setup` understands, with their defaults (`reviews = false` turns it all off).
M.defaults = {
  -- Show each open change inline (virtual lines and a label); false leaves only agentls's
  -- diagnostics.
  virtual_text = true,
  -- Buffer-local keys, set in a buffer while it has open changes; false (or a key set to
  -- false) leaves them out.
  keys = {
    accept = '<leader>aa', -- accept the change under the cursor
    reject = '<leader>ar', -- reject the change under the cursor
    accept_all = '<leader>aA', -- accept every open change in this file
    reject_all = '<leader>aR', -- reject every open change in this file
    next = ']e', -- go to the next change (]r, [r are spelling motions)
    prev = '[e', -- go to the previous change
    diff = '<leader>ad', -- :AgentDiff
  },
}

local options = vim.deepcopy(M.defaults)

--- uri -> the open reviews on that file, as the last `agentls/reviewChanged` for it said.
M.by_uri = {}
--- bufnr -> the hunks drawn in it: { review, hunk, mark } (mark: the extmark over its old text).
local drawn = {}
--- bufnr -> the scratch buffer of its `:AgentDiff` view.
local diff_views = {}
--- bufnr -> true while its keymaps are set.
local mapped = {}

--- Whether `review`'s hunks go back to an earlier text (a change made without asking, a turn
--- being undone): Undo accepts them, Keep rejects them.
local function goes_back(review)
  return review.kind ~= 'proposal'
end

local HL = {
  AgentlsReviewOld = 'DiffDelete',
  AgentlsReviewNew = 'DiffAdd',
  AgentlsReviewAccepted = 'DiffChange',
  AgentlsReviewLabel = 'Comment',
  AgentlsReviewConflict = 'DiagnosticWarn',
}

local function define_highlights()
  for name, link in pairs(HL) do
    vim.api.nvim_set_hl(0, name, { link = link, default = true })
  end
end

local function client_of(bufnr)
  local get = vim.lsp.get_clients or vim.lsp.get_active_clients
  return get({ bufnr = bufnr, name = NAME })[1] or get({ name = NAME })[1]
end

--- The loaded buffer holding `uri`, if any (never creates one).
local function buffer_of(uri)
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.uri_from_bufnr(bufnr) == uri then
      return bufnr
    end
  end
end

--- Byte column of `character` (in `encoding`) in `line`.
local function byte_col(line, character, encoding)
  if encoding == 'utf-8' then
    return math.min(character, #line)
  end
  local ok, col
  if has_011 then
    ok, col = pcall(vim.str_byteindex, line, encoding, character, false)
  else
    ok, col = pcall(vim.str_byteindex, line, character, encoding == 'utf-16')
  end
  return ok and col or #line
end

--- An LSP position as (row, byte col) in `bufnr`, clamped to the buffer.
local function to_pos(bufnr, position, encoding)
  local count = vim.api.nvim_buf_line_count(bufnr)
  if position.line >= count then
    local last = count - 1
    return last, #(vim.api.nvim_buf_get_lines(bufnr, last, last + 1, false)[1] or '')
  end
  local line = vim.api.nvim_buf_get_lines(bufnr, position.line, position.line + 1, false)[1] or ''
  return position.line, byte_col(line, position.character, encoding)
end

--- `text` as lines, without the empty piece after a final line break.
local function lines_of(text)
  local lines = vim.split(text or '', '\n', { plain = true })
  if lines[#lines] == '' then
    table.remove(lines)
  end
  return lines
end

--- The key for `action` as configured, or nil when left out.
local function key(action)
  local keys = options.keys
  return keys and keys[action] or nil
end

--- `lhs` as the user types it (`<leader>` spelled out as the leader key).
local function typed(lhs)
  local leader = vim.g.mapleader or '\\'
  leader = leader == ' ' and '<Space>' or leader
  return (lhs:gsub('<[Ll][Ee][Aa][Dd][Ee][Rr]>', function()
    return leader
  end))
end

--- How `review`'s hunk reads for the label, in `verb` form.
local function label_of(review, hunk, count)
  local who = review.origin and review.origin.label or 'agent'
  local what = ('%s: change %d/%d'):format(who, hunk.index + 1, count)
  local accept, reject = key('accept'), key('reject')
  local function keys(yes, no)
    local parts = {}
    if accept then
      table.insert(parts, typed(accept) .. ' ' .. yes)
    end
    if reject then
      table.insert(parts, typed(reject) .. ' ' .. no)
    end
    return #parts > 0 and ('  ' .. table.concat(parts, ' · ')) or ''
  end
  if hunk.state == 'approved' then
    return what .. ' ACCEPTED (applied once you decide the others)', 'AgentlsReviewAccepted'
  elseif hunk.state == 'conflict' then
    return what .. ' CONFLICTS with your edit' .. (reject and ('  ' .. typed(reject) .. ' reject') or ''),
      'AgentlsReviewConflict'
  elseif goes_back(review) then
    local did = review.kind == 'landed' and ' changed this without asking' or ' changed this'
    return who .. (did .. ' (%d/%d)'):format(hunk.index + 1, count)
      .. keys('undo', 'keep'), 'AgentlsReviewLabel'
  end
  return what .. keys('accept', 'reject'), 'AgentlsReviewLabel'
end

--- The hunks worth drawing: waiting for a decision, or accepted and not applied yet.
local function shown(hunk)
  return hunk.range ~= nil
    and (hunk.state == 'pending' or hunk.state == 'conflict' or hunk.state == 'approved')
end

local function draw_hunk(bufnr, review, hunk, count, encoding)
  local srow, scol = to_pos(bufnr, hunk.range.start, encoding)
  local erow, ecol = to_pos(bufnr, hunk.range['end'], encoding)
  local landed = goes_back(review)
  -- What the buffer holds there and what the change would put instead (a landed change's hunk
  -- goes back to the text before it: its "new" side is the old text).
  local there_hl = landed and 'AgentlsReviewNew' or 'AgentlsReviewOld'
  local instead_hl = landed and 'AgentlsReviewOld' or 'AgentlsReviewNew'
  if hunk.state == 'approved' then
    instead_hl = 'AgentlsReviewAccepted'
  end
  local mark = vim.api.nvim_buf_set_extmark(bufnr, ns, srow, scol, {
    end_row = erow,
    end_col = ecol,
    hl_group = (erow > srow or ecol > scol) and there_hl or nil,
    hl_eol = true,
    right_gravity = false,
    end_right_gravity = true,
    strict = false,
  })
  if options.virtual_text == false then
    return mark
  end
  local label, label_hl = label_of(review, hunk, count)
  -- The last row of the old text (a range ending at column 0 of a line ends on the line before).
  local last = erow
  if ecol == 0 and erow > srow then
    last = erow - 1
  end
  local virt = {}
  for _, line in ipairs(lines_of(hunk.newText)) do
    table.insert(virt, { { line, instead_hl } })
  end
  local empty_old = srow == erow and scol == ecol
  local line_count = vim.api.nvim_buf_line_count(bufnr)
  if empty_old then
    -- An insertion: above the line it goes before, or below the last line at the very end.
    local above = srow < line_count and scol == 0
    table.insert(virt, 1, { { label, label_hl } })
    vim.api.nvim_buf_set_extmark(bufnr, ns, math.min(srow, line_count - 1), 0, {
      virt_lines = virt,
      virt_lines_above = above,
      strict = false,
    })
  else
    vim.api.nvim_buf_set_extmark(bufnr, ns, srow, 0, {
      virt_text = { { '  ' .. label, label_hl } },
      virt_text_pos = 'eol',
      strict = false,
    })
    if #virt > 0 then
      vim.api.nvim_buf_set_extmark(bufnr, ns, math.min(last, line_count - 1), 0, {
        virt_lines = virt,
        strict = false,
      })
    end
  end
  return mark
end

--- The hunks drawn in `bufnr` with where their old text is now: { review, hunk, srow, scol,
--- erow, ecol }, in buffer order.
local function placed(bufnr)
  local out = {}
  for _, item in ipairs(drawn[bufnr] or {}) do
    local pos = vim.api.nvim_buf_get_extmark_by_id(bufnr, ns, item.mark, { details = true })
    if pos[1] then
      table.insert(out, {
        review = item.review,
        hunk = item.hunk,
        srow = pos[1],
        scol = pos[2],
        erow = pos[3].end_row or pos[1],
        ecol = pos[3].end_col or pos[2],
      })
    end
  end
  table.sort(out, function(a, b)
    return a.srow < b.srow or (a.srow == b.srow and a.scol < b.scol)
  end)
  return out
end

--- The hunk of `bufnr` under row `row` (0-based): the one whose lines hold it, else an
--- insertion right at it.
local function hunk_at(bufnr, row)
  for _, p in ipairs(placed(bufnr)) do
    local last = p.erow
    if p.ecol == 0 and p.erow > p.srow then
      last = p.erow - 1
    end
    if row >= p.srow and row <= last then
      return p
    end
  end
end

local function run(command, argument, bufnr)
  require('agentls.commands').run(command, argument, nil, bufnr)
end

--- Accepts (`accept` true) or rejects the change under the cursor.
function M.decide_here(accept)
  local bufnr = vim.api.nvim_get_current_buf()
  local p = hunk_at(bufnr, vim.api.nvim_win_get_cursor(0)[1] - 1)
  if not p or p.hunk.state == 'approved' then
    vim.notify('agentls: no change to decide under the cursor', vim.log.levels.WARN)
    return
  end
  if accept and p.hunk.state == 'conflict' then
    vim.notify('agentls: this change conflicts with your edit: reject it', vim.log.levels.WARN)
    return
  end
  run(accept and 'agentls.accept' or 'agentls.reject', { review = p.review.id, hunk = p.hunk.index }, bufnr)
end

--- Accepts (`accept` true) or rejects every open change in the current buffer's file.
function M.decide_all(accept)
  local bufnr = vim.api.nvim_get_current_buf()
  local reviews = M.by_uri[vim.uri_from_bufnr(bufnr)] or {}
  if #reviews == 0 then
    vim.notify('agentls: no pending change in this file', vim.log.levels.WARN)
  end
  for _, review in ipairs(reviews) do
    run(accept and 'agentls.accept' or 'agentls.reject', { review = review.id }, bufnr)
  end
end

--- Moves the cursor to the next (`forward`) or previous change.
function M.jump(forward)
  local bufnr = vim.api.nvim_get_current_buf()
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local list = placed(bufnr)
  local target
  if forward then
    for _, p in ipairs(list) do
      if p.srow > row then
        target = p
        break
      end
    end
    target = target or list[1]
  else
    for i = #list, 1, -1 do
      if list[i].srow < row then
        target = list[i]
        break
      end
    end
    target = target or list[#list]
  end
  if target then
    local last = vim.api.nvim_buf_line_count(bufnr) - 1
    vim.api.nvim_win_set_cursor(0, { math.min(target.srow, last) + 1, 0 })
  end
end

local ACTIONS = {
  accept = { 'Accept the agent change under the cursor', function() M.decide_here(true) end },
  reject = { 'Reject the agent change under the cursor', function() M.decide_here(false) end },
  accept_all = { 'Accept every agent change in this file', function() M.decide_all(true) end },
  reject_all = { 'Reject every agent change in this file', function() M.decide_all(false) end },
  next = { 'Go to the next agent change', function() M.jump(true) end },
  prev = { 'Go to the previous agent change', function() M.jump(false) end },
  diff = { 'Show the agent proposal beside this buffer in diff mode', function() M.diff() end },
}

local function set_keys(bufnr, on)
  if (mapped[bufnr] or false) == on or not options.keys then
    return
  end
  for action, spec in pairs(ACTIONS) do
    local lhs = key(action)
    if lhs then
      if on then
        vim.keymap.set('n', lhs, spec[2], { buffer = bufnr, desc = 'agentls: ' .. spec[1] })
      else
        pcall(vim.keymap.del, 'n', lhs, { buffer = bufnr })
      end
    end
  end
  mapped[bufnr] = on or nil
end

--- The text of `bufnr` with every pending (and accepted, not yet applied) change of its
--- proposals put in, as lines.
local function proposed_lines(bufnr)
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  local list = placed(bufnr)
  for i = #list, 1, -1 do
    local p = list[i]
    if not goes_back(p.review) and (p.hunk.state == 'pending' or p.hunk.state == 'approved') then
      local first = lines[p.srow + 1] or ''
      local last = lines[p.erow + 1] or ''
      local before = first:sub(1, p.scol)
      local after = last:sub(p.ecol + 1)
      local text = before .. (p.hunk.newText or '') .. after
      if p.erow >= #lines - 1 and p.ecol >= #last and text:sub(-1) == '\n' then
        -- The change takes the last line with its line break, which Neovim keeps apart from
        -- the lines ('eol'): the break it puts back is that one.
        text = text:sub(1, -2)
      end
      local replacement = vim.split(text, '\n', { plain = true })
      local stop = math.min(p.erow + 1, #lines)
      for _ = p.srow + 1, stop do
        table.remove(lines, p.srow + 1)
      end
      for j = #replacement, 1, -1 do
        table.insert(lines, p.srow + 1, replacement[j])
      end
    end
  end
  return lines
end

local function refresh_diff(bufnr)
  local view = diff_views[bufnr]
  if not view or not vim.api.nvim_buf_is_valid(view) then
    diff_views[bufnr] = nil
    return
  end
  vim.bo[view].modifiable = true
  vim.api.nvim_buf_set_lines(view, 0, -1, false, proposed_lines(bufnr))
  vim.bo[view].modifiable = false
  vim.bo[view].modified = false
end

--- `:AgentDiff`: the current buffer's proposal (every pending change put in) in a scratch
--- buffer beside it, both in diff mode; it follows the reviews until closed.
function M.diff()
  local bufnr = vim.api.nvim_get_current_buf()
  if #placed(bufnr) == 0 then
    vim.notify('agentls: no pending change in this file', vim.log.levels.WARN)
    return
  end
  local existing = diff_views[bufnr]
  if existing and vim.api.nvim_buf_is_valid(existing) and vim.fn.bufwinid(existing) ~= -1 then
    vim.fn.win_gotoid(vim.fn.bufwinid(existing))
    return
  end
  local source_win = vim.api.nvim_get_current_win()
  local filetype = vim.bo[bufnr].filetype
  vim.cmd('rightbelow vertical new')
  local view = vim.api.nvim_get_current_buf()
  vim.bo[view].buftype = 'nofile'
  vim.bo[view].bufhidden = 'wipe'
  vim.bo[view].swapfile = false
  pcall(vim.api.nvim_buf_set_name, view, 'agentls://proposal/' .. vim.fn.fnamemodify(vim.api.nvim_buf_get_name(bufnr), ':t'))
  vim.bo[view].filetype = filetype
  diff_views[bufnr] = view
  refresh_diff(bufnr)
  vim.cmd('diffthis')
  vim.keymap.set('n', 'q', '<cmd>close<cr>', { buffer = view, desc = 'agentls: close the proposal' })
  vim.api.nvim_create_autocmd('BufWipeout', {
    buffer = view,
    once = true,
    callback = function()
      diff_views[bufnr] = nil
      vim.schedule(function()
        for _, win in ipairs(vim.fn.win_findbuf(bufnr)) do
          vim.api.nvim_win_call(win, function()
            vim.cmd('diffoff')
          end)
        end
      end)
    end,
  })
  vim.api.nvim_win_call(source_win, function()
    vim.cmd('diffthis')
  end)
end

--- Clients whose diagnostics no longer show as virtual text (the inline view says it better).
local quieted = {}

--- agentls's diagnostics show one per change at the end of its line (Neovim 0.10's default):
--- beside the inline view they repeat it and push its label off the screen. Their signs, list
--- and float stay.
local function quiet_diagnostics(client)
  if not client or quieted[client.id] or options.virtual_text == false then
    return
  end
  quieted[client.id] = true
  local ok, namespace = pcall(vim.lsp.diagnostic.get_namespace, client.id, false)
  if ok and namespace then
    vim.diagnostic.config({ virtual_text = false, virtual_lines = false }, namespace)
  end
end

--- Draws the reviews known for `bufnr`'s file, and sets or removes its keymaps.
function M.render(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) then
    return
  end
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  drawn[bufnr] = {}
  local reviews = M.by_uri[vim.uri_from_bufnr(bufnr)] or {}
  local client = client_of(bufnr)
  local encoding = client and client.offset_encoding or 'utf-16'
  quiet_diagnostics(client)
  for _, review in ipairs(reviews) do
    local count = #(review.hunks or {})
    for _, hunk in ipairs(review.hunks or {}) do
      if shown(hunk) then
        local ok, mark = pcall(draw_hunk, bufnr, review, hunk, count, encoding)
        if ok then
          table.insert(drawn[bufnr], { review = review, hunk = hunk, mark = mark })
        end
      end
    end
  end
  set_keys(bufnr, #drawn[bufnr] > 0)
  refresh_diff(bufnr)
end

--- The open hunks drawn in `bufnr`, for tests and statuslines: { review, index, state, row }.
function M.pending(bufnr)
  local out = {}
  for _, p in ipairs(placed(bufnr or vim.api.nvim_get_current_buf())) do
    table.insert(out, { review = p.review.id, index = p.hunk.index, state = p.hunk.state, row = p.srow })
  end
  return out
end

--- Handles `agentls/reviewChanged`: `{uri, path, reviews}` for one file (older servers sent
--- `{reviews}` for every file: then every file is replaced).
function M.on_review_changed(_, params)
  params = params or {}
  local touched = {}
  if params.uri then
    M.by_uri[params.uri] = params.reviews or {}
    touched[params.uri] = true
  else
    for uri in pairs(M.by_uri) do
      touched[uri] = true
    end
    M.by_uri = {}
    for _, review in ipairs(params.reviews or {}) do
      local uri = review.uri or vim.uri_from_fname(review.path)
      M.by_uri[uri] = M.by_uri[uri] or {}
      table.insert(M.by_uri[uri], review)
      touched[uri] = true
    end
  end
  for uri in pairs(touched) do
    if #(M.by_uri[uri] or {}) == 0 then
      M.by_uri[uri] = nil
    end
    local bufnr = buffer_of(uri)
    if bufnr then
      M.render(bufnr)
    end
  end
end

--- Forgets everything (the client stopped).
function M.clear()
  M.by_uri = {}
  for bufnr in pairs(drawn) do
    if vim.api.nvim_buf_is_valid(bufnr) then
      vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
      set_keys(bufnr, false)
    end
  end
  drawn = {}
end

--- Sets the options (see M.defaults); returns the client handlers to add.
function M.setup(opts)
  options = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts or {})
  if opts and opts.keys == false then
    options.keys = false
  end
  define_highlights()
  local group = vim.api.nvim_create_augroup('agentls.reviews', { clear = true })
  vim.api.nvim_create_autocmd('ColorScheme', { group = group, callback = define_highlights })
  -- A file opened after its review was announced.
  vim.api.nvim_create_autocmd('BufReadPost', {
    group = group,
    callback = function(args)
      if M.by_uri[vim.uri_from_bufnr(args.buf)] then
        M.render(args.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd('BufWipeout', {
    group = group,
    callback = function(args)
      drawn[args.buf] = nil
      mapped[args.buf] = nil
    end,
  })
  -- agentls stopped: its reviews went with it.
  vim.api.nvim_create_autocmd('LspDetach', {
    group = group,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data and args.data.client_id or -1)
      if client and client.name == NAME then
        vim.schedule(function()
          local get = vim.lsp.get_clients or vim.lsp.get_active_clients
          if #get({ name = NAME }) == 0 then
            M.clear()
          end
        end)
      end
    end,
  })
  vim.api.nvim_create_user_command('AgentDiff', M.diff, {
    desc = "Show the agent's proposal for this file beside it in diff mode",
  })
  return { ['agentls/reviewChanged'] = M.on_review_changed }
end

return M
