// The palette commands (category "agentls"): each runs one or two agentls commands
// (`workspace/executeCommand`), asking what it needs with an input box or a quick pick.
// agentls itself tells every outcome and error (a message, the chat).
const fs = require('fs');
const os = require('os');
const path = require('path');
const vscode = require('vscode');
const { chatAgent, currentChat, draft, showChat } = require('./chat');

/** The agent `name` (or the default one) in `agentls.status`, and its current session. */
function agentIn(status, name) {
  const agents = (status && status.agents) || [];
  const agent = agents.find((a) => (name ? a.name === name : a.default)) || (name ? undefined : agents[0]);
  const session = agent && (agent.sessions || []).find((s) => s.current);
  return { agent, session };
}

/** The select option of `session` that picks its model (id or category `model`), flattened. */
function modelOption(session) {
  for (const option of (session && session.configOptions) || []) {
    if (option.type === 'select' && (option.id === 'model' || option.category === 'model')) {
      const values = [];
      for (const entry of option.options || []) {
        for (const choice of entry.options || [entry]) values.push(choice);
      }
      return { option, values };
    }
  }
  return undefined;
}

/** The agent the command is about: the argument's, the active chat's, else undefined (default). */
function agentFor(argument) {
  if (argument && typeof argument.agent === 'string') return argument.agent;
  const active = vscode.window.activeTextEditor;
  return active ? chatAgent(active.document) : undefined;
}

/** The user's agentls config file, as agentls finds it. */
function configFile() {
  if (process.env.AGENTLS_CONFIG) return process.env.AGENTLS_CONFIG;
  const base = process.env.XDG_CONFIG_HOME || path.join(os.homedir(), '.config');
  return path.join(base, 'agentls', 'config.toml');
}

const CONFIG_TEMPLATE = `# agentls configuration: what agentls runs, and the guard rails only this file may loosen.
# Everything else can also be set in VS Code's settings (agentls.*).
# See the Configuration section of agentls's README.

# defaultAgent = "claude"

# [agents.claude]
# command = "npx"
# args = ["@agentclientprotocol/claude-agent-acp"]
# mode = "default"
`;

function register(agentls, openPathSetting) {
  const run = (command, argument) => agentls.run(command, argument);
  const status = () => run('agentls.status');

  /**
   * A chat with an agent (asked for when several are configured and none is named): a new one,
   * or with `latest`, the agent's latest chat of the workspace when it has one.
   */
  async function openChat(argument, latest) {
    let agent = argument && argument.agent;
    if (!agent) {
      const s = await status();
      const agents = (s && s.agents) || [];
      if (agents.length > 1) {
        const picked = await vscode.window.showQuickPick(
          agents.map((a) => ({ label: a.name, description: a.default ? 'default' : a.state })),
          { title: 'agentls: open a chat with', placeHolder: 'Agent' },
        );
        if (!picked) return;
        agent = picked.label;
      }
    }
    const result = await run('agentls.openChat', { ...(agent ? { agent } : {}), new: !latest });
    if (result && result.uri) await showChatOf(result.uri);
  }

  /** Shows the chat `uri` and remembers it as its agent's. */
  async function showChatOf(uri) {
    const editor = await showChat(uri, true);
    const chatOf = chatAgent(editor.document);
    if (chatOf) agentls.chats.set(chatOf, editor.document.uri);
  }

  /** Open Chat and the status bar item: the agent's chat on screen, else its latest one. */
  async function showOrOpenChat() {
    const s = agentls.status.status;
    const { agent } = agentIn(s);
    const known = agent && agentls.chats.get(agent.name);
    if (known) {
      await showChat(known, true);
      return;
    }
    await openChat(agent ? { agent: agent.name } : undefined, true);
  }

  /** The workspace's chats (agentls lists them as workspace symbols), picked by first message. */
  async function pickChat() {
    const symbols = await agentls.request('workspace/symbol', { query: '' });
    if (!symbols || symbols.length === 0) {
      vscode.window.showInformationMessage('agentls: no chats in this workspace yet (agentls: New Chat starts one).');
      return;
    }
    const picked = await vscode.window.showQuickPick(
      symbols.map((s) => ({ label: s.name, description: s.containerName, uri: s.location.uri })),
      { title: 'agentls: chats of this workspace', placeHolder: 'First message', matchOnDescription: true },
    );
    if (picked) await showChatOf(picked.uri);
  }

  async function prompt(argument) {
    const agent = agentFor(argument);
    const editor = agentls.codeEditor;
    let text = argument && argument.text;
    if (!text) {
      const name = agent || (agentls.status.status && agentls.status.status.defaultAgent) || 'the agent';
      const about = editor
        ? editor.selection.isEmpty
          ? `${vscode.workspace.asRelativePath(editor.document.uri)} goes along`
          : `the selection in ${vscode.workspace.asRelativePath(editor.document.uri)} goes along`
        : 'no file goes along';
      text = await vscode.window.showInputBox({
        title: `agentls: prompt ${name}`,
        prompt: `What should ${name} do? (${about}; the reply goes to its chat)`,
        placeHolder: 'e.g. uppercase the TODO lines',
        ignoreFocusOut: true,
      });
    }
    if (!text) return;
    const payload = { text };
    if (agent) payload.agent = agent;
    if (editor && !editor.document.isClosed) {
      payload.uri = editor.document.uri.toString();
      if (!editor.selection.isEmpty) {
        payload.range = agentls.client.code2ProtocolConverter.asRange(editor.selection);
      }
    }
    const result = await run('agentls.prompt', payload);
    if (result && result.chat) {
      // The reply streams into the chat: show it beside, the focus stays in the code.
      const editorOfChat = await showChat(result.chat, false);
      agentls.chats.set(result.agent, editorOfChat.document.uri);
    }
  }

  async function send(argument) {
    const document = argument && argument.uri ? await vscode.workspace.openTextDocument(vscode.Uri.parse(argument.uri)) : currentChat();
    if (!document) {
      vscode.window.showInformationMessage('agentls: open a chat first (agentls: Open Chat)');
      return;
    }
    if (!draft(document)) {
      const agent = chatAgent(document);
      const text = await vscode.window.showInputBox({
        title: `agentls: message to ${agent}`,
        prompt: `Goes under the last "## You" of the chat and to ${agent}`,
        ignoreFocusOut: true,
      });
      if (!text) return;
      const end = document.lineAt(document.lineCount - 1).range.end;
      const before = document.getText().endsWith('\n') ? '' : '\n';
      const edit = new vscode.WorkspaceEdit();
      edit.insert(document.uri, end, `${before}${text}\n`);
      await vscode.workspace.applyEdit(edit);
    }
    await run('agentls.send', { uri: document.uri.toString() });
  }

  async function cancel(argument) {
    const agent = agentFor(argument);
    const result = await run('agentls.cancel', agent ? { agent } : undefined);
    if (result && result.cancelled === false) {
      vscode.window.showInformationMessage(`agentls: ${agent || 'the agent'} has no turn running`);
    }
  }

  async function setMode(argument) {
    const s = await status();
    const { agent, session } = agentIn(s, agentFor(argument));
    const modes = (session && session.modes && session.modes.availableModes) || [];
    if (!agent || !modes.length) {
      vscode.window.showWarningMessage('agentls: no modes to pick from yet: the agent offers them once a session runs (prompt it or open a chat first)');
      return;
    }
    const picked = argument && argument.mode
      ? { id: argument.mode }
      : await vscode.window.showQuickPick(
          modes.map((m) => ({ label: m.name, description: m.id === session.mode ? `${m.id} · current` : m.id, detail: m.description || undefined, id: m.id })),
          { title: `agentls: ${agent.name}'s mode`, placeHolder: 'Mode', matchOnDescription: true },
        );
    if (picked) await run('agentls.setMode', { agent: agent.name, mode: picked.id });
  }

  async function setModel(argument) {
    const s = await status();
    const { agent, session } = agentIn(s, agentFor(argument));
    const model = modelOption(session);
    if (!agent || !model) {
      vscode.window.showWarningMessage('agentls: the agent offers no model to pick (yet: prompt it or open a chat first)');
      return;
    }
    const current = model.option.currentValue;
    const picked = await vscode.window.showQuickPick(
      model.values.map((v) => ({ label: v.name || v.value, description: v.value === current ? `${v.value} · current` : v.value, detail: v.description || undefined, value: v.value })),
      { title: `agentls: ${agent.name}'s model`, placeHolder: 'Model', matchOnDescription: true },
    );
    if (picked) await run('agentls.setOption', { agent: agent.name, option: model.option.id, value: picked.value });
  }

  async function showStatus() {
    const s = await status();
    if (!s) return;
    const items = ((s && s.agents) || []).map((a) => {
      const session = (a.sessions || []).find((x) => x.current);
      const parts = [a.state];
      if (session) parts.push(`mode ${session.mode}`, session.state);
      if (a.pid) parts.push(`pid ${a.pid}`);
      return {
        label: `$(hubot) ${a.name}${a.default ? ' (default)' : ''}`,
        description: parts.join(' · '),
        detail: a.lastError ? `last error: ${a.lastError}` : `${a.command} ${(a.args || []).join(' ')}`,
      };
    });
    const pending = agentls.reviews.open().length;
    items.push({ label: `$(diff) ${pending} change${pending === 1 ? '' : 's'} to review`, action: 'reviews' });
    items.push({ label: '$(json) Show the whole status (JSON)', action: 'json' });
    const picked = await vscode.window.showQuickPick(items, { title: 'agentls: status', placeHolder: 'Agents and sessions' });
    if (picked && picked.action === 'reviews') await agentls.reviews.pick();
    if (picked && picked.action === 'json') {
      const document = await vscode.workspace.openTextDocument({ language: 'json', content: JSON.stringify(s, null, 2) });
      await vscode.window.showTextDocument(document, { preview: true });
    }
  }

  async function openConfig() {
    const file = configFile();
    if (!fs.existsSync(file)) {
      const create = await vscode.window.showInformationMessage(`agentls: ${file} does not exist yet.`, 'Create It');
      if (create !== 'Create It') return;
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, CONFIG_TEMPLATE, { flag: 'wx' });
    }
    await vscode.window.showTextDocument(vscode.Uri.file(file));
  }

  const decide = (keep) => async (reviewId, hunk) => {
    const review = agentls.reviews.find(reviewId);
    if (review) await agentls.reviews.decide(review, hunk, keep);
  };

  const table = {
    'agentls.client.openChat': showOrOpenChat,
    'agentls.client.newChat': (argument) => openChat(argument, false),
    'agentls.client.pickChat': pickChat,
    'agentls.client.prompt': prompt,
    'agentls.client.send': send,
    'agentls.client.cancel': cancel,
    'agentls.client.setMode': setMode,
    'agentls.client.setModel': setModel,
    'agentls.client.newSession': (argument) => run('agentls.newSession', agentFor(argument) ? { agent: agentFor(argument) } : undefined),
    'agentls.client.showStatus': showStatus,
    'agentls.client.pendingReviews': () => agentls.reviews.pick(),
    'agentls.client.showDiff': (uri) => agentls.reviews.showDiff(uri),
    'agentls.client.keep': decide(true),
    'agentls.client.undo': decide(false),
    'agentls.client.rerequest': async (reviewId) => {
      const review = agentls.reviews.find(reviewId);
      if (review) await agentls.reviews.rerequest(review);
    },
    'agentls.client.openSettings': () => vscode.commands.executeCommand('workbench.action.openSettings', '@ext:agentls.agentls'),
    'agentls.client.openConfig': openConfig,
    'agentls.client.openPathSetting': openPathSetting,
    'agentls.client.restart': () => agentls.restart(),
    'agentls.client.showLog': () => agentls.output.show(),
  };
  return Object.entries(table).map(([id, fn]) => vscode.commands.registerCommand(id, fn));
}

module.exports = { register };
