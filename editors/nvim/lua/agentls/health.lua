-- `:checkhealth agentls`: the Neovim version, the binary the plugin runs (found, its version), the running clients,
-- the agents agentls knows and how each stands, and what `agentls doctor` says of the config.

local M = {}

local NAME = 'agentls'

local function get_clients(filter)
  return (vim.lsp.get_clients or vim.lsp.get_active_clients)(filter)
end

--- The program the plugin starts: the running client's, else the configured one, else `agentls`.
local function program()
  local client = get_clients({ name = NAME })[1]
  local cmd = client and client.config and client.config.cmd
  if type(cmd) ~= 'table' and vim.lsp.config then
    cmd = (vim.lsp.config[NAME] or {}).cmd
  end
  return type(cmd) == 'table' and cmd[1] or NAME
end

--- The output of `cmd` (a list), or nil and why.
local function output_of(cmd)
  local out = vim.fn.system(cmd)
  if vim.v.shell_error ~= 0 then
    return nil, ('exit code %d: %s'):format(vim.v.shell_error, vim.trim(out))
  end
  return out
end

--- What `agentls.status` says through `client`, or nil.
local function status_of(client)
  local params = { command = 'agentls.status' }
  local response
  if vim.fn.has('nvim-0.11') == 1 then
    response = client:request_sync('workspace/executeCommand', params, 5000, 0)
  else
    response = client.request_sync('workspace/executeCommand', params, 5000, 0)
  end
  return response and response.result
end

function M.check()
  local health = vim.health
  health.start('agentls: Neovim')
  local v = vim.version()
  if vim.fn.has('nvim-0.10') == 1 then
    health.ok(('Neovim %d.%d.%d (the plugin needs 0.10 or newer)'):format(v.major, v.minor, v.patch))
  else
    health.error(('Neovim %d.%d.%d: the plugin needs 0.10 or newer'):format(v.major, v.minor, v.patch))
  end
  health.start('agentls: the server')
  local exe = program()
  if vim.fn.executable(exe) ~= 1 then
    health.error(('`%s` is not an executable on PATH'):format(exe), {
      'install it with `cargo install --path .` from the agentls repository',
      'or give its full path: require("agentls").setup({ cmd = { "/path/to/agentls" } })',
    })
    return
  end
  local version, why = output_of({ exe, '--version' })
  if version then
    health.ok(('%s (%s)'):format(vim.trim(version), vim.fn.exepath(exe)))
  else
    health.error(('`%s --version` failed: %s'):format(exe, why))
  end

  health.start('agentls: this Neovim')
  local clients = get_clients({ name = NAME })
  if #clients == 0 then
    health.warn('agentls is not running: open a file (it attaches to every file by default)')
  end
  for _, client in ipairs(clients) do
    health.ok(('client %d, workspace %s, %d buffer(s)'):format(
      client.id,
      client.root_dir or '(none)',
      vim.tbl_count(client.attached_buffers or {})
    ))
    local status = status_of(client)
    local agents = status and status.agents or {}
    for _, agent in ipairs(agents) do
      local line = ('agent %s%s: %s'):format(agent.name, agent.default and ' (default)' or '', agent.state)
      if agent.lastError then
        health.warn(line .. ' — ' .. agent.lastError)
      else
        health.ok(line)
      end
    end
  end

  health.start('agentls: config (agentls doctor)')
  local doctor, failed = output_of({ exe, 'doctor' })
  if doctor then
    for _, line in ipairs(vim.split(vim.trim(doctor), '\n')) do
      health.info(line)
    end
  else
    health.warn('`agentls doctor` failed: ' .. failed)
  end
end

return M
