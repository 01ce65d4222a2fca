// Finds the agentls executable before the language client tries to spawn it, so that a missing
// binary is a clear message with a button instead of `spawn agentls ENOENT`.
const fs = require('fs');
const os = require('os');
const path = require('path');

/** Whether `file` is an executable regular file. */
function executable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** `~/…` with the home directory spelled out. */
function expandHome(file) {
  return file === '~' || file.startsWith('~/') ? path.join(os.homedir(), file.slice(1)) : file;
}

/**
 * The absolute path of the agentls executable named by `setting` (the `agentls.path` setting):
 * a path (absolute, or with `~/`) is taken as it is; a bare name is looked up on the extension
 * host's PATH, then in `~/.cargo/bin` (where `cargo install` puts it, and which a PATH set up
 * by a login shell's profile may lack). Returns `{ found, looked }`: the path or `undefined`,
 * and where it looked, for the message.
 */
function findBinary(setting) {
  const name = expandHome((setting || '').trim() || 'agentls');
  if (name.includes('/') || name.includes(path.sep)) {
    const file = path.resolve(name);
    return { found: executable(file) ? file : undefined, looked: [file] };
  }
  const dirs = (process.env.PATH || '').split(path.delimiter).filter(Boolean);
  dirs.push(path.join(os.homedir(), '.cargo', 'bin'));
  const looked = [];
  for (const dir of dirs) {
    const file = path.join(dir, name);
    looked.push(dir);
    if (executable(file)) return { found: file, looked };
  }
  return { found: undefined, looked };
}

module.exports = { findBinary };
