-- Buffers reloaded, not left modified, once the disk catches up: when an agent wrote a file
-- itself and agentls brought your buffer in line with it (or agentls wrote the buffer's text to
-- disk before a command), the buffer holds exactly what the file holds, yet Neovim still sees it
-- as 'modified' and the file as changed since it was read: `:w` asks "WARNING: The file has been
-- changed since reading it!!!", `:q` says E37, `:checktime` warns W12. Such a buffer is taken as
-- unmodified and reloaded the way 'autoread' reloads (Neovim's record of the file is renewed;
-- the text, the cursor and the undo history stay). Only ever when the text is byte for byte what
-- the file holds, or when agentls says the buffer holds the file's text under your unsaved edits
-- (`agentls/diskInBuffer`, with the file's SHA-256): then the file is read again and your edits
-- put back on top, so `:w` does not ask (W12). Any other change on disk gets Neovim's usual
-- question.

local M = {}

local uv = vim.uv or vim.loop

--- bufnr -> { fs_event } watching its file's folder until the disk catches up.
local watches = {}
--- The text `bufnr` would write, or nil when Neovim would convert it on writing (another
--- encoding, CRLF, a BOM): then nothing here is sure to match and nothing is done.
local function text_to_write(bufnr)
  local bo = vim.bo[bufnr]
  if bo.fileformat ~= 'unix' or bo.bomb or (bo.fileencoding ~= '' and bo.fileencoding ~= 'utf-8') then
    return nil
  end
  local lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, true)
  local text = table.concat(lines, '\n')
  if bo.eol or (bo.fixeol and not bo.binary) then
    text = text .. '\n'
  end
  if #lines == 1 and lines[1] == '' and not bo.eol then
    text = ''
  end
  return text
end

local function read_file(path)
  local file = io.open(path, 'rb')
  if not file then
    return nil
  end
  local text = file:read('*a')
  file:close()
  return text
end

--- Whether `bufnr` is a file buffer whose text is exactly what its file holds.
function M.matches_disk(bufnr)
  if not vim.api.nvim_buf_is_loaded(bufnr) or vim.bo[bufnr].buftype ~= '' then
    return false
  end
  local path = vim.api.nvim_buf_get_name(bufnr)
  if path == '' then
    return false
  end
  local text = text_to_write(bufnr)
  if text == nil then
    return false
  end
  -- The size first: most buffers that differ from their file differ in it, and a stat is cheap.
  local stat = uv.fs_stat(path)
  return stat ~= nil and stat.size == #text and text == read_file(path)
end

--- bufnr -> true once its FileChangedShell autocmd is set.
local guarded = {}

--- bufnr -> the SHA-256 of the disk text agentls says the buffer holds under unsaved edits.
local in_buffer = {}
--- bufnr -> the text (lines) and window views to put back once the file is read again.
local put_back = {}

--- Whether `bufnr`'s file holds what agentls said the buffer holds already.
local function disk_in_buffer(bufnr)
  local sha = in_buffer[bufnr]
  if not sha then
    return false
  end
  local text = read_file(vim.api.nvim_buf_get_name(bufnr))
  return text ~= nil and vim.fn.sha256(text) == sha
end

--- Keeps `bufnr`'s lines and its windows' views for [`restore`] after Neovim reloads the file.
local function keep_for_reload(bufnr)
  local views = {}
  for _, win in ipairs(vim.fn.win_findbuf(bufnr)) do
    views[win] = vim.api.nvim_win_call(win, vim.fn.winsaveview)
  end
  put_back[bufnr] = { lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, true), views = views }
end

--- Puts the kept lines back over the file just read, as one undo step with the reload (only
--- the lines that differ are set, so marks and folds elsewhere stay).
local function restore(bufnr)
  local kept = put_back[bufnr]
  put_back[bufnr] = nil
  if not kept or not vim.api.nvim_buf_is_loaded(bufnr) then
    return
  end
  local now = vim.api.nvim_buf_get_lines(bufnr, 0, -1, true)
  local a, b = table.concat(now, '\n') .. '\n', table.concat(kept.lines, '\n') .. '\n'
  local hunks = vim.diff(a, b, { result_type = 'indices' })
  vim.api.nvim_buf_call(bufnr, function()
    pcall(vim.cmd, 'undojoin')
    -- From the last hunk up, so the earlier ones' line numbers hold.
    for i = #hunks, 1, -1 do
      local start_a, count_a, start_b, count_b = unpack(hunks[i])
      local first = count_a == 0 and start_a or start_a - 1
      local lines = vim.list_slice(kept.lines, start_b, start_b + count_b - 1)
      vim.api.nvim_buf_set_lines(bufnr, first, first + count_a, true, lines)
    end
  end)
  for win, view in pairs(kept.views) do
    if vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_buf(win) == bufnr then
      vim.api.nvim_win_call(win, function()
        vim.fn.winrestview(view)
      end)
    end
  end
end

--- Handles `agentls/diskInBuffer` (`{uri, sha256}`): the file's text is in the buffer already,
--- so Neovim is brought to take the file as read at once, before a `:w` would ask.
function M.on_disk_in_buffer(_, params)
  if type(params) ~= 'table' or type(params.uri) ~= 'string' then
    return
  end
  local bufnr = vim.fn.bufnr(vim.uri_to_fname(params.uri))
  if bufnr == -1 or not vim.api.nvim_buf_is_loaded(bufnr) or not guarded[bufnr] then
    return
  end
  in_buffer[bufnr] = params.sha256
  pcall(vim.cmd, 'checktime ' .. bufnr)
end

local function unwatch(bufnr)
  local watch = watches[bufnr]
  watches[bufnr] = nil
  if watch then
    for _, handle in ipairs(watch) do
      if not handle:is_closing() then
        handle:close()
      end
    end
  end
end

--- Takes `bufnr` as saved when its text is what its file holds; returns whether it did.
function M.settle(bufnr)
  if not vim.api.nvim_buf_is_valid(bufnr) or not vim.bo[bufnr].modified or not M.matches_disk(bufnr) then
    return false
  end
  vim.bo[bufnr].modified = false
  unwatch(bufnr)
  -- Reloaded as 'autoread' does (or through the FileChangedShell below), once Neovim deems it
  -- harmless: that renews its record of the file, which :w checks.
  pcall(vim.cmd, 'checktime ' .. bufnr)
  return true
end

--- Settles `bufnr` now, or once its file catches up (watched until the buffer is written,
--- settled or wiped): called after agentls edited the buffer. agentls writes such a buffer to
--- disk itself before an agent's command runs, and agents write their files whenever they like.
function M.after_edit(bufnr)
  if not vim.bo[bufnr].modified then
    return
  end
  local path = vim.api.nvim_buf_get_name(bufnr)
  if path ~= '' and not watches[bufnr] then
    local dir, name = vim.fs.dirname(path), vim.fs.basename(path)
    local event = uv.new_fs_event()
    if event then
      watches[bufnr] = { event }
      -- The folder, not the file: a file replaced by a rename keeps no watch of its own.
      event:start(dir, {}, function(err, filename)
        if not err and (filename == nil or filename == name) then
          vim.schedule(function()
            M.settle(bufnr)
          end)
        end
      end)
    end
  end
  -- Looked at once the watch is on: a write between the look and the watch is not missed
  -- (it was, one run in eight on a loaded machine: the buffer stayed modified).
  M.settle(bufnr)
end

--- Sets up the autocmds: in a buffer agentls serves, a changed file whose text the buffer
--- already holds is reloaded without a question (any other change gets Neovim's usual one), and
--- before quitting every buffer that matches its file is taken as unmodified.
function M.setup()
  local group = vim.api.nvim_create_augroup('agentls.disk', { clear = true })
  guarded = {}
  -- On the buffers agentls serves only: others keep whatever Neovim and your config do.
  vim.api.nvim_create_autocmd('LspAttach', {
    group = group,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data and args.data.client_id or -1)
      if not client or client.name ~= 'agentls' or guarded[args.buf] then
        return
      end
      guarded[args.buf] = true
      vim.api.nvim_create_autocmd('FileChangedShell', {
        group = group,
        buffer = args.buf,
        callback = function(ev)
          local reason = vim.v.fcs_reason
          local changed = reason == 'conflict' or reason == 'changed'
          if changed and M.matches_disk(ev.buf) then
            vim.v.fcs_choice = 'reload'
          elseif changed and disk_in_buffer(ev.buf) then
            keep_for_reload(ev.buf)
            vim.v.fcs_choice = 'reload'
            vim.b[ev.buf].agentls_disk_in_buffer = in_buffer[ev.buf]
            in_buffer[ev.buf] = nil
          elseif vim.v.fcs_choice == '' then
            -- As if there were no autocommand: Neovim asks.
            vim.v.fcs_choice = 'ask'
          end
        end,
      })
      vim.api.nvim_create_autocmd('FileChangedShellPost', {
        group = group,
        buffer = args.buf,
        callback = function(ev)
          restore(ev.buf)
        end,
      })
    end,
  })
  -- Saved by you: nothing to wait for.
  vim.api.nvim_create_autocmd('BufWritePost', {
    group = group,
    callback = function(args)
      unwatch(args.buf)
      in_buffer[args.buf] = nil
    end,
  })
  -- Before Neovim counts the buffers with unsaved changes (E37, E162).
  vim.api.nvim_create_autocmd('QuitPre', {
    group = group,
    callback = function()
      for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
        if vim.bo[bufnr].modified then
          M.settle(bufnr)
        end
      end
    end,
  })
  vim.api.nvim_create_autocmd({ 'BufUnload', 'BufWipeout' }, {
    group = group,
    callback = function(args)
      unwatch(args.buf)
      in_buffer[args.buf] = nil
      if args.event == 'BufWipeout' then
        guarded[args.buf] = nil
      end
    end,
  })
end

return M
