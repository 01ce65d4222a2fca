// The `agentls.*` settings: which belong to this extension and which to the server, and the
// server's part as the object agentls reads (`initializationOptions` and
// `workspace/didChangeConfiguration`).
const vscode = require('vscode');

/** Settings this extension reads itself; they never reach the server. */
const CLIENT_KEYS = ['path', 'logFile', 'trace.server'];

/**
 * The server's settings the user set (in user, workspace or folder settings), nested as the
 * server's config schema has them: `{review: {maxPreviewLines: 4}}`. Defaults are left out on
 * purpose, so that agentls's own config file decides whatever the user did not set here (a
 * contributed default of `mcp.enabled: true` would otherwise overrule the file's `false`).
 */
function serverSettings(packageJSON) {
  const properties = packageJSON.contributes.configuration.properties;
  const config = vscode.workspace.getConfiguration('agentls');
  const settings = {};
  for (const full of Object.keys(properties)) {
    const key = full.slice('agentls.'.length);
    if (CLIENT_KEYS.includes(key)) continue;
    const seen = config.inspect(key);
    if (!seen) continue;
    const value = [seen.workspaceFolderValue, seen.workspaceValue, seen.globalValue].find(
      (v) => v !== undefined,
    );
    // An empty string where the default is one means "not set" (the Settings UI's empty box).
    if (value === undefined || (value === '' && properties[full].default === '')) continue;
    const parts = key.split('.');
    let node = settings;
    for (const part of parts.slice(0, -1)) node = node[part] = node[part] || {};
    node[parts[parts.length - 1]] = value;
  }
  return settings;
}

module.exports = { CLIENT_KEYS, serverSettings };
