// The status bar item (the default agent, its state, the changes waiting for you; a click opens
// the chat) and the progress notification of a running turn, whose Cancel button cancels it.
const vscode = require('vscode');

class StatusItem {
  constructor() {
    this.item = vscode.window.createStatusBarItem('agentls.status', vscode.StatusBarAlignment.Right, 100);
    this.item.name = 'agentls';
    this.item.command = 'agentls.client.openChat';
    this.status = undefined;
    this.pending = 0;
    this.problem = undefined;
    this.running = new Set();
    this.render();
    this.item.show();
  }

  dispose() {
    this.item.dispose();
  }

  /** The server cannot run (no binary): say so; a click opens the setting. */
  setProblem(text) {
    this.problem = text;
    this.render();
  }

  setStatus(status) {
    this.status = status;
    this.render();
  }

  setPending(count) {
    this.pending = count;
    this.render();
  }

  /** A turn of `agent` started (`true`) or ended. */
  setRunning(agent, running) {
    if (running) this.running.add(agent);
    else this.running.delete(agent);
    this.render();
  }

  render() {
    const item = this.item;
    if (this.problem) {
      item.text = '$(error) agentls';
      item.tooltip = this.problem;
      item.command = 'agentls.client.openPathSetting';
      item.backgroundColor = new vscode.ThemeColor('statusBarItem.errorBackground');
      return;
    }
    item.backgroundColor = undefined;
    item.command = 'agentls.client.openChat';
    const agents = (this.status && this.status.agents) || [];
    const agent = agents.find((a) => a.default) || agents[0];
    const name = agent ? agent.name : (this.status && this.status.defaultAgent) || 'agentls';
    const session = agent && (agent.sessions || []).find((s) => s.current);
    let state = agent ? agent.state : 'starting';
    if (this.running.has(name) || state === 'prompting') state = 'working';
    else if (state === 'running') state = 'idle';
    const icon = state === 'working' ? '$(sync~spin)' : state === 'failed' ? '$(error)' : '$(hubot)';
    const parts = [`${icon} ${name}`, state];
    if (this.pending > 0) parts.push(`$(diff) ${this.pending}`);
    item.text = parts.join(' · ');
    const lines = [`**agentls** · agent \`${name}\` · ${state}`];
    if (session && session.mode) lines.push(`mode: ${session.mode}`);
    if (agent && agent.lastError) lines.push(`last error: ${agent.lastError}`);
    lines.push(this.pending === 1 ? '1 change to review' : `${this.pending} changes to review`);
    lines.push('', 'Click to open the chat');
    item.tooltip = new vscode.MarkdownString(lines.join('  \n'));
  }
}

/**
 * Shows agentls's `$/progress` (a turn) as a notification with a Cancel button, in place of the
 * language client's status bar spinner (which cannot cancel). `cancel(agent)` cancels; the
 * progress title is the agent's name.
 */
function trackProgress(client, statusItem, cancel, onChange) {
  const { WorkDoneProgress } = require('vscode-languageclient/node');
  return client.onRequest('window/workDoneProgress/create', (params) => {
    const token = params.token;
    let finish;
    let progress;
    let agent;
    const done = new Promise((resolve) => (finish = resolve));
    const listener = client.onProgress(WorkDoneProgress.type, token, (value) => {
      if (value.kind === 'begin') {
        agent = value.title;
        statusItem.setRunning(agent, true);
        onChange();
        vscode.window.withProgress(
          { location: vscode.ProgressLocation.Notification, title: `agentls: ${agent}`, cancellable: true },
          (reporter, cancelled) => {
            progress = reporter;
            if (value.message) reporter.report({ message: value.message });
            cancelled.onCancellationRequested(() => cancel(agent));
            return done;
          },
        );
      } else if (value.kind === 'report') {
        if (progress && value.message) progress.report({ message: value.message });
      } else if (value.kind === 'end') {
        listener.dispose();
        if (agent) statusItem.setRunning(agent, false);
        finish();
        onChange();
      }
    });
    return null;
  });
}

module.exports = { StatusItem, trackProgress };
