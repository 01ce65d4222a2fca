// Chat documents: markdown files agentls writes (`# Chat with <agent>` on their first line),
// shown beside the code, and what the user wrote under their last `## You`.
const vscode = require('vscode');

const HEADING = /^# Chat with (\S+)/;

/** The agent a chat document talks to, or `undefined` when `document` is not a chat. */
function chatAgent(document) {
  if (!document || document.uri.scheme !== 'file' || document.lineCount === 0) return undefined;
  const match = HEADING.exec(document.lineAt(0).text);
  return match ? match[1] : undefined;
}

/** What the user wrote under the last `## You` heading (trimmed; empty when nothing). */
function draft(document) {
  const text = document.getText();
  const at = text.lastIndexOf('\n## You');
  return at < 0 ? '' : text.slice(at + '\n## You'.length).trim();
}

let showing = Promise.resolve();

/**
 * Shows the chat `uri` beside the code: where it is already visible, that editor; else in the
 * column of the chat on screen (chats share one); else in a new column beside the active one. `focus` moves the focus to it; `"if-hidden"` only
 * when it was not visible (agentls's `window/showDocument` must not pull the focus back to a
 * chat the user just left). Calls are serialized, so agentls's call and the extension's own never
 * open it twice.
 */
function showChat(uri, focus) {
  const target = typeof uri === 'string' ? (uri.includes(':') ? vscode.Uri.parse(uri) : vscode.Uri.file(uri)) : uri;
  const next = showing.then(async () => {
    const editors = vscode.window.visibleTextEditors;
    const visible = editors.find((e) => e.document.uri.toString() === target.toString());
    const chatShown = editors.find((e) => chatAgent(e.document));
    const document = await vscode.workspace.openTextDocument(target);
    const viewColumn = (visible || chatShown || { viewColumn: vscode.ViewColumn.Beside }).viewColumn;
    const preserveFocus = focus === 'if-hidden' ? !!visible : !focus;
    const editor = await vscode.window.showTextDocument(document, { viewColumn, preserveFocus, preview: false });
    if (!visible) {
      // A chat opens at its end, where the conversation goes on and the next message is written.
      const end = document.lineAt(document.lineCount - 1).range.end;
      editor.selection = new vscode.Selection(end, end);
      editor.revealRange(new vscode.Range(end, end), vscode.TextEditorRevealType.Default);
    }
    return editor;
  });
  showing = next.catch(() => undefined);
  return next;
}

/** The chat to act on: the active editor's, else a visible one's (of `agent`, if given). */
function currentChat(agent) {
  const active = vscode.window.activeTextEditor;
  if (active && chatAgent(active.document)) return active.document;
  const visible = vscode.window.visibleTextEditors.find((e) => {
    const a = chatAgent(e.document);
    return a && (!agent || a === agent);
  });
  return visible ? visible.document : undefined;
}

module.exports = { chatAgent, currentChat, draft, showChat };
