// agentls for VS Code: starts the agentls language server (vscode-languageclient) for every
// file, sends it the selection (`agentls/didChangeSelection`) and the other servers'
// diagnostics (`agentls/didChangeDiagnostics`), and adds what VS Code shows better than plain
// LSP: palette commands, the chat beside the code, Keep/Undo CodeLens and a diff for reviews, a
// status bar item and a cancellable progress notification. Everything else (messages, code
// actions, completion in chats) is agentls's standard LSP.
const vscode = require('vscode');
const { LanguageClient, TransportKind, State } = require('vscode-languageclient/node');
const { findBinary } = require('./binary');
const { CLIENT_KEYS, serverSettings } = require('./settings');
const { Reviews } = require('./reviews');
const { StatusItem, trackProgress } = require('./status');
const { chatAgent, showChat } = require('./chat');
const commands = require('./commands');

/**
 * The `agentls/*` notifications this extension handles (see `start`), asked for at initialize.
 * Not `sessionUpdate`: a turn's progress already says when an agent starts and stops working, and
 * an agent's stream is megabytes of updates.
 */
const PLUGIN_EVENTS = ['reviewChanged'];

/** The running language client, the status bar item and the reviews, for the commands. */
class Agentls {
  constructor(context) {
    this.context = context;
    this.client = undefined;
    this.output = vscode.window.createOutputChannel('agentls');
    this.status = new StatusItem();
    this.reviews = new Reviews((command, argument) => this.run(command, argument));
    /** The last file editor that is not a chat: the context of a prompt. */
    this.codeEditor = undefined;
    /** The chat last opened or prompted into, by agent. */
    this.chats = new Map();
    this.refreshTimer = undefined;
    /** The restart waiting for a change of `agentls.path` or `agentls.logFile` to settle. */
    this.restartTimer = undefined;
    /** Chat editor → whether its view follows the end (see `followChat`). */
    this.following = new WeakMap();
    /** Chat editor → the first line its view showed last (see `trackScroll`). */
    this.viewTops = new WeakMap();
    /** Chat URI → its save in progress. */
    this.chatSaves = new Map();
  }

  /** Starts the server, or says clearly why it cannot. */
  async start() {
    const config = vscode.workspace.getConfiguration('agentls');
    const { found, looked } = findBinary(config.get('path'));
    if (!found) {
      const setting = config.get('path') || 'agentls';
      const where = setting.includes('/') ? setting : `\`${setting}\` on PATH or in ~/.cargo/bin`;
      const text = `agentls: the agentls executable was not found (looked for ${where}). Install it, or set "agentls.path" to its full path.`;
      this.output.appendLine(`${text} Looked in: ${looked.join(', ')}. To install: \`cargo install --locked --path .\` in the agentls repository (puts it in ~/.cargo/bin).`);
      this.status.setProblem(text);
      vscode.window.showErrorMessage(text, 'Open Settings', 'Show Log').then((choice) => {
        if (choice === 'Open Settings') openPathSetting();
        if (choice === 'Show Log') this.output.show();
      });
      return;
    }
    this.status.setProblem(undefined);
    const args = [];
    const logFile = config.get('logFile');
    if (logFile) args.push('--log-file', logFile);
    const client = new LanguageClient(
      'agentls',
      'agentls',
      { command: found, args, transport: TransportKind.stdio },
      {
        documentSelector: [{ scheme: 'file' }],
        outputChannel: this.output,
        initializationOptions: {
          ...serverSettings(this.context.extension.packageJSON),
          // The `agentls/*` notifications handled below: agentls sends no others.
          pluginEvents: PLUGIN_EVENTS,
        },
        middleware: {
          window: {
            // A chat goes beside the code; anything else where VS Code puts it.
            showDocument: async (params, next) => {
              const uri = vscode.Uri.parse(params.uri);
              if (params.external || uri.scheme !== 'file') return next(params);
              try {
                const document = await vscode.workspace.openTextDocument(uri);
                const agent = chatAgent(document);
                if (agent) {
                  this.chats.set(agent, uri);
                  await showChat(uri, params.takeFocus === false ? false : 'if-hidden');
                  return { success: true };
                }
                // A file (a review's first change): where it is already visible, else where the
                // code is, never in the chat's column.
                const visible = vscode.window.visibleTextEditors.find((e) => e.document.uri.toString() === uri.toString());
                const active = vscode.window.activeTextEditor;
                const inChat = active && chatAgent(active.document);
                const column = visible ? visible.viewColumn : inChat && this.codeEditor ? this.codeEditor.viewColumn : undefined;
                if (column !== undefined) {
                  const editor = await vscode.window.showTextDocument(document, {
                    viewColumn: column,
                    preserveFocus: params.takeFocus === false,
                  });
                  if (params.selection) {
                    const range = this.client.protocol2CodeConverter.asRange(params.selection);
                    editor.selection = new vscode.Selection(range.start, range.end);
                    editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
                  }
                  return { success: true };
                }
              } catch {
                // Not a text file we can read: VS Code's own handling says why.
              }
              return next(params);
            },
          },
          // Reviews show as CodeLens and decorations (reviews.js); agentls's inlay hints, made
          // for editors without those, would repeat them glued to the text.
          provideInlayHints: () => [],
        },
      },
    );
    this.client = client;
    client.onDidChangeState((event) => {
      if (event.newState === State.Stopped) {
        this.reviews.clear();
        this.status.setStatus(undefined);
      }
    });
    try {
      await client.start();
    } catch (error) {
      this.output.appendLine(`agentls did not start: ${error && error.message ? error.message : error}`);
      vscode.window.showErrorMessage(`agentls did not start: ${error && error.message ? error.message : error}`, 'Show Log').then((choice) => {
        if (choice) this.output.show();
      });
      return;
    }
    const subscriptions = [
      client.onNotification('agentls/reviewChanged', (params) => this.reviews.update(params)),
      client.onNotification('window/showMessage', (params) => this.showMessage(params)),
      trackProgress(client, this.status, (agent) => this.run('agentls.cancel', { agent }), () => this.refreshSoon()),
    ];
    this.clientSubscriptions = subscriptions;
    this.refreshSoon();
  }

  async stop() {
    const client = this.client;
    this.client = undefined;
    for (const d of this.clientSubscriptions || []) d.dispose();
    this.clientSubscriptions = [];
    if (client && client.state !== State.Stopped) {
      try {
        await client.stop();
      } catch {
        // Already gone.
      }
    }
    this.reviews.clear();
  }

  async restart() {
    await this.stop();
    await this.start();
  }

  /** Runs agentls command `command` with `argument` (none when undefined); errors are shown. */
  async run(command, argument) {
    try {
      return await this.request('workspace/executeCommand', {
        command,
        arguments: argument === undefined ? [] : [argument],
      });
    } finally {
      this.refreshSoon();
    }
  }

  /** Sends agentls the LSP request `method`; its result, or undefined with the error shown. */
  async request(method, params) {
    if (!this.client || this.client.state !== State.Running) {
      vscode.window.showWarningMessage('agentls is not running (see the agentls output for why).');
      return undefined;
    }
    try {
      return await this.client.sendRequest(method, params);
    } catch (error) {
      vscode.window.showErrorMessage(error && error.message ? error.message : String(error));
      return undefined;
    }
  }

  /** Asks agentls for its status within a moment (coalesced), for the status bar item. */
  refreshSoon() {
    if (this.refreshTimer) return;
    this.refreshTimer = setTimeout(async () => {
      this.refreshTimer = undefined;
      if (!this.client || this.client.state !== State.Running) return;
      try {
        const status = await this.client.sendRequest('workspace/executeCommand', { command: 'agentls.status', arguments: [] });
        this.status.setStatus(status);
      } catch {
        // The next event asks again.
      }
    }, 250);
  }

  /** Tells agentls the selection of `editor`. */
  sendSelection(editor) {
    if (!this.client || this.client.state !== State.Running) return;
    if (editor.document.uri.scheme !== 'file') return;
    const selection = editor.selection;
    this.client.sendNotification('agentls/didChangeSelection', {
      textDocument: { uri: editor.document.uri.toString() },
      selection: this.client.code2ProtocolConverter.asRange(selection),
      text: editor.document.getText(selection),
    });
  }

  /** Agents see what the other language servers say (agentls's own diagnostics left out). */
  sendDiagnostics(uris) {
    if (!this.client || this.client.state !== State.Running) return;
    for (const uri of uris) {
      if (uri.scheme !== 'file') continue;
      const diagnostics = vscode.languages
        .getDiagnostics(uri)
        .filter((d) => d.source !== 'agentls')
        .map((d) => this.client.code2ProtocolConverter.asDiagnostic(d));
      this.client.sendNotification('agentls/didChangeDiagnostics', { uri: uri.toString(), diagnostics });
    }
  }

  /**
   * Saves a chat document as soon as it changed (agentls streams the reply into the editor's
   * buffer, at most ten edits a second): a chat is a log of the conversation, and closing it must
   * not ask to save it. One save at a time; changes during a save are saved right after it.
   * (Called on every change event of a chat, also the one that only says it became modified: a
   * document is not yet marked modified when the event of its edit fires.)
   */
  saveChatSoon(document) {
    const key = document.uri.toString();
    const state = this.chatSaves.get(key);
    if (state) {
      state.again = true;
      return;
    }
    const entry = { again: false };
    this.chatSaves.set(key, entry);
    const save = async () => {
      do {
        entry.again = false;
        if (!document.isClosed) await document.save();
      } while (entry.again);
      this.chatSaves.delete(key);
    };
    save().catch(() => this.chatSaves.delete(key));
  }

  /**
   * Keeps the end of a chat in view while the reply streams in, like a terminal: in each editor
   * showing it whose view was at the end (scrolling up stops following; back to the end, it
   * follows again).
   */
  followChat(document) {
    for (const editor of vscode.window.visibleTextEditors) {
      if (editor.document !== document || this.following.get(editor) === false) continue;
      const end = document.lineAt(document.lineCount - 1).range.end;
      editor.revealRange(new vscode.Range(end, end), vscode.TextEditorRevealType.Default);
    }
  }

  /**
   * Notes whether a chat editor's view follows the chat's end (see `followChat`): at the end it
   * does; scrolled up (its first line moved up) it stops. A view that only got shorter (a panel
   * opened below it) keeps following, and shows the end again.
   */
  trackScroll(editor, visibleRanges) {
    if (!chatAgent(editor.document) || !visibleRanges.length) return;
    const first = visibleRanges[0].start.line;
    const last = visibleRanges[visibleRanges.length - 1].end.line;
    const before = this.viewTops.get(editor);
    this.viewTops.set(editor, first);
    if (last >= editor.document.lineCount - 2) {
      this.following.set(editor, true);
    } else if (before !== undefined && first < before) {
      this.following.set(editor, false);
    } else if (this.following.get(editor) !== false) {
      const end = editor.document.lineAt(editor.document.lineCount - 1).range.end;
      editor.revealRange(new vscode.Range(end, end), vscode.TextEditorRevealType.Default);
    }
  }

  /**
   * agentls's `window/showMessage`: errors and warnings as notifications; information (a turn's
   * summary, which the chat shows as well) on the status bar for a while and in the output, so
   * that a turn leaves no pile of notifications over the chat.
   */
  showMessage({ type, message }) {
    this.output.appendLine(message);
    if (type === 1) vscode.window.showErrorMessage(message);
    else if (type === 2) vscode.window.showWarningMessage(message);
    else if (type === 3) vscode.window.setStatusBarMessage(`$(info) ${message}`, 10000);
  }

  trackEditor(editor) {
    if (editor && editor.document.uri.scheme === 'file' && !chatAgent(editor.document)) {
      this.codeEditor = editor;
    }
  }
}

let agentls;

/**
 * Opens the Settings editor at `agentls.path`: in a remote window (code-server, SSH, WSL) that
 * is the remote machine's settings, where a machine setting lives.
 */
function openPathSetting() {
  if (vscode.env.remoteName) {
    return vscode.commands.executeCommand('workbench.action.openRemoteSettings', { query: 'agentls.path' });
  }
  return vscode.commands.executeCommand('workbench.action.openSettings', 'agentls.path');
}

async function activate(context) {
  agentls = new Agentls(context);
  const packageJSON = context.extension.packageJSON;
  agentls.trackEditor(vscode.window.activeTextEditor);
  context.subscriptions.push(
    agentls.output,
    agentls.status,
    ...agentls.reviews.register(),
    agentls.reviews.onDidChange(() => agentls.status.setPending(agentls.reviews.open().length)),
    ...commands.register(agentls, openPathSetting),
    vscode.window.onDidChangeActiveTextEditor((editor) => agentls.trackEditor(editor)),
    vscode.window.onDidChangeTextEditorSelection((event) => {
      agentls.trackEditor(event.textEditor);
      agentls.sendSelection(event.textEditor);
    }),
    vscode.workspace.onDidChangeTextDocument((event) => {
      if (!chatAgent(event.document)) return;
      if (event.document.isDirty || event.contentChanges.length) agentls.saveChatSoon(event.document);
      if (event.contentChanges.length) agentls.followChat(event.document);
    }),
    vscode.window.onDidChangeTextEditorVisibleRanges((event) => agentls.trackScroll(event.textEditor, event.visibleRanges)),
    vscode.languages.onDidChangeDiagnostics((event) => agentls.sendDiagnostics(event.uris)),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (['agentls.path', 'agentls.logFile'].some((key) => event.affectsConfiguration(key))) {
        // Once the typing in the Settings editor (which writes as you type) has paused.
        clearTimeout(agentls.restartTimer);
        agentls.restartTimer = setTimeout(() => agentls.restart(), 800);
        return;
      }
      const server = Object.keys(packageJSON.contributes.configuration.properties).filter(
        (key) => !CLIENT_KEYS.includes(key.slice('agentls.'.length)),
      );
      if (agentls.client && server.some((key) => event.affectsConfiguration(key))) {
        agentls.client.sendNotification('workspace/didChangeConfiguration', {
          settings: { agentls: serverSettings(packageJSON) },
        });
      }
    }),
  );
  await agentls.start();
}

function deactivate() {
  return agentls ? agentls.stop() : undefined;
}

module.exports = { activate, deactivate };
