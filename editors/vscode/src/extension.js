// Minimal VS Code client for agentls: starts `agentls` over stdio for every file, sends the
// selection as `agentls/didChangeSelection` and the other servers' diagnostics as
// `agentls/didChangeDiagnostics`.
const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

let client;

async function activate(context) {
  const command = vscode.workspace.getConfiguration('agentls').get('path') || 'agentls';
  client = new LanguageClient(
    'agentls',
    'agentls',
    { command, transport: TransportKind.stdio },
    {
      documentSelector: [{ scheme: 'file' }],
      synchronize: { configurationSection: 'agentls' },
    },
  );
  await client.start();
  context.subscriptions.push(
    vscode.window.onDidChangeTextEditorSelection((event) => {
      const editor = event.textEditor;
      if (editor.document.uri.scheme !== 'file') return;
      const selection = editor.selection;
      client.sendNotification('agentls/didChangeSelection', {
        textDocument: { uri: editor.document.uri.toString() },
        selection: client.code2ProtocolConverter.asRange(selection),
        text: editor.document.getText(selection),
      });
    }),
    // Agents see what the other language servers say (agentls's own diagnostics excluded).
    vscode.languages.onDidChangeDiagnostics((event) => {
      for (const uri of event.uris) {
        if (uri.scheme !== 'file') continue;
        const diagnostics = vscode.languages
          .getDiagnostics(uri)
          .filter((d) => d.source !== 'agentls')
          .map((d) => client.code2ProtocolConverter.asDiagnostic(d));
        client.sendNotification('agentls/didChangeDiagnostics', {
          uri: uri.toString(),
          diagnostics,
        });
      }
    }),
  );
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
