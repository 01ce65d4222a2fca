-- Driven by tests/editor_nvim.rs: the code blocks of editors/nvim/README.md, run as written
-- (with `agentls` on PATH): the lazy.nvim spec, set up the way lazy.nvim sets a spec up (the
-- folder on the runtime path, then `require(main).setup(opts)`; lazy.nvim itself is on GitHub
-- only), the suggested keymaps, and the terminal-agent snippet (with a shell command standing in
-- for `claude`). Prints what happened as ONE JSON line on stdout.
--
--   nvim --headless --clean -l readme_blocks.lua <plugin dir> <agentls binary> <log file> <notes file> <env output file>

local plugin_dir, _, _, notes, env_file = unpack(arg)
assert(env_file, 'usage: readme_blocks.lua PLUGIN_DIR SERVER LOG NOTES ENV_FILE')

local helpers = dofile(vim.fs.joinpath(vim.fs.dirname(arg[0]), 'helpers.lua'))
helpers.watchdog(30000)
local wait_for = helpers.waiter(10000)

--- The lua block after the line holding `marker` in the README, or the `n`th lua block after
--- the heading `marker`.
local function block(marker, n)
  local readme = table.concat(vim.fn.readfile(vim.fs.joinpath(plugin_dir, 'README.md')), '\n')
  local at = assert(readme:find(marker, 1, true), marker)
  local rest = readme:sub(at)
  for _ = 1, (n or 1) - 1 do
    local _, e = rest:find('```lua\n.-\n```')
    rest = rest:sub(e + 1)
  end
  return assert(rest:match('```lua\n(.-)\n```'), 'no lua block after ' .. marker)
end

local output = {}
local ok, err = xpcall(function()
  local repo = vim.fs.dirname(vim.fs.dirname(plugin_dir))
  -- The lazy.nvim spec, as lazy.nvim takes it.
  local spec = assert(loadstring('return ' .. block('<!-- lazy spec:')))()
  spec.dir = spec.dir:gsub('/path/to/agentls', repo)
  output.spec = { name = spec.name, main = spec.main, dir_is_plugin = vim.uv.fs_stat(spec.dir .. '/lua/agentls.lua') ~= nil }
  vim.opt.rtp:append(spec.dir)
  require(spec.main).setup(spec.opts)

  -- The suggested keymaps.
  assert(loadstring(block('Suggested global keymaps')))()
  output.keymaps = {}
  for _, mode in ipairs({ 'n', 'x' }) do
    for _, map in ipairs(vim.api.nvim_get_keymap(mode)) do
      if (map.desc or ''):find('^agentls') then
        table.insert(output.keymaps, mode .. ' ' .. map.lhs)
      end
    end
  end
  table.sort(output.keymaps)

  local bufnr = helpers.edit_attached(notes, wait_for)
  output.attached = vim.lsp.get_clients({ bufnr = bufnr, name = 'agentls' })[1] ~= nil

  -- The terminal snippet, with a command that writes the environment it got for `claude`.
  local snippet = block('e.g. the terminal-agent environment')
  local agent = ("'sh', '-c', 'env | grep -E \"^(CLAUDE_CODE|GEMINI_CLI_IDE)\" > %s'"):format(env_file)
  snippet = snippet:gsub("'claude'", agent)
  if vim.fn.has('nvim-0.11') == 0 then
    snippet = snippet:gsub('vim%.fn%.jobstart%((.-), { term = true, env = env }%)', 'vim.fn.termopen(%1, { env = env })')
  end
  output.snippet = snippet
  assert(loadstring(snippet))()
  wait_for('the terminal to run with the env', function()
    local file = io.open(env_file, 'r')
    local text = file and file:read('*a') or ''
    if file then
      file:close()
    end
    return text:find('CLAUDE_CODE_SSE_PORT', 1, true) ~= nil
  end)
  output.terminal_env = true
end, debug.traceback)

helpers.finish(ok, err, output)
