// Agents' changes waiting for the user, as agentls reports them (`agentls/reviewChanged`, one
// file at a time): Keep / Undo CodeLens per change and for the whole review, a tint on the text a
// change replaces with the new text after it, a diff editor per file, and the list of every
// pending change.
//
// "Keep" always means "have the agent's change" and "Undo" "do not": for a proposal (not applied
// yet) Keep accepts and Undo rejects; for a change an agent made without asking (kind `landed`,
// whose hunks propose going back) Keep rejects the way back and Undo accepts it.
const vscode = require('vscode');

const DIFF_SCHEME = 'agentls-review';

/** The open states: a decision is still to be made. */
const OPEN = ['pending', 'conflict'];

/** Whether a review's hunks go back to an earlier text (kind `landed`: a change made without
 * asking; `turnUndo`: a turn being undone), so Undo accepts them and Keep rejects them. */
function goesBack(review) {
  return review.kind !== 'proposal';
}

/** A URI string in VS Code's own spelling, so the server's and the editor's compare equal. */
function normalize(uri) {
  return vscode.Uri.parse(uri).toString();
}

class Reviews {
  /** `run(command, argument)` runs an agentls command. */
  constructor(run) {
    this.run = run;
    /** Normalized file URI → that file's open reviews. */
    this.byUri = new Map();
    this.changed = new vscode.EventEmitter();
    this.lensesChanged = new vscode.EventEmitter();
    this.diffChanged = new vscode.EventEmitter();
    this.onDidChange = this.changed.event;
    this.replaced = vscode.window.createTextEditorDecorationType({
      backgroundColor: new vscode.ThemeColor('diffEditor.removedTextBackground'),
      isWholeLine: false,
      overviewRulerColor: new vscode.ThemeColor('editorOverviewRuler.deletedForeground'),
      overviewRulerLane: vscode.OverviewRulerLane.Left,
    });
    this.inserted = vscode.window.createTextEditorDecorationType({
      after: {
        color: new vscode.ThemeColor('editorGhostText.foreground'),
        fontStyle: 'italic',
        margin: '0 0 0 1.5em',
      },
    });
  }

  /** The disposables to register. */
  register() {
    return [
      this.changed,
      this.lensesChanged,
      this.diffChanged,
      this.replaced,
      this.inserted,
      vscode.languages.registerCodeLensProvider({ scheme: 'file' }, {
        onDidChangeCodeLenses: this.lensesChanged.event,
        provideCodeLenses: (document) => this.lenses(document),
      }),
      vscode.workspace.registerTextDocumentContentProvider(DIFF_SCHEME, {
        onDidChange: this.diffChanged.event,
        provideTextDocumentContent: (uri) => this.otherSide(uri),
      }),
      vscode.window.onDidChangeVisibleTextEditors(() => this.decorateAll()),
      vscode.workspace.onDidChangeTextDocument((event) => {
        // The diff's other side follows what the user types.
        if (this.byUri.has(event.document.uri.toString())) {
          this.diffChanged.fire(this.diffUri(event.document.uri));
        }
      }),
    ];
  }

  /**
   * `agentls/reviewChanged`: the open reviews of one file, `{uri, path, reviews}` (an empty list:
   * none left there). (An agentls older than that sends every open review without `uri`: then
   * the whole map is replaced.)
   */
  update(params) {
    const live = (params.reviews || []).filter((r) => r.hunks.some((h) => h.state !== 'accepted' && h.state !== 'rejected'));
    const keyOf = (r) => normalize(r.uri || vscode.Uri.file(r.path).toString());
    const touched = new Set();
    if (params.uri || params.path) {
      const key = normalize(params.uri || vscode.Uri.file(params.path).toString());
      touched.add(key);
      if (live.length) this.byUri.set(key, live);
      else this.byUri.delete(key);
    } else {
      for (const key of this.byUri.keys()) touched.add(key);
      this.byUri.clear();
      for (const review of live) {
        const key = keyOf(review);
        touched.add(key);
        this.byUri.set(key, [...(this.byUri.get(key) || []), review]);
      }
    }
    this.lensesChanged.fire();
    for (const key of touched) this.diffChanged.fire(this.diffUri(vscode.Uri.parse(key)));
    this.decorateAll();
    this.changed.fire();
  }

  /** Forgets everything (the server stopped). */
  clear() {
    this.byUri.clear();
    this.lensesChanged.fire();
    this.decorateAll();
    this.changed.fire();
  }

  /** Every change still waiting for a decision, with its review and file. */
  open() {
    const out = [];
    for (const [uri, reviews] of this.byUri) {
      for (const review of reviews) {
        for (const hunk of review.hunks) {
          if (OPEN.includes(hunk.state)) out.push({ uri, review, hunk });
        }
      }
    }
    return out;
  }

  /** Keep (`keep` true) or undo one change, or every open change of a review (`hunk` undefined). */
  async decide(review, hunk, keep) {
    const accept = goesBack(review) ? !keep : keep;
    const argument = { review: review.id };
    if (hunk !== undefined) argument.hunk = hunk;
    await this.run(accept ? 'agentls.accept' : 'agentls.reject', argument);
  }

  /** Rejects a conflicting change and asks its agent to propose it again. */
  async rerequest(review) {
    await this.run('agentls.reject', { review: review.id, rerequest: true });
  }

  lenses(document) {
    const reviews = this.byUri.get(document.uri.toString()) || [];
    const lenses = [];
    for (const review of reviews) {
      const open = review.hunks.filter((h) => OPEN.includes(h.state) && h.range);
      if (!open.length) continue;
      const agent = review.origin && review.origin.label ? review.origin.label : 'agent';
      for (const hunk of open) {
        const r = range(hunk.range);
        const line = new vscode.Range(r.start.line, 0, r.start.line, 0);
        const number = `${hunk.index + 1}/${review.hunks.length}`;
        const lens = (title, id, args, tooltip) =>
          new vscode.CodeLens(line, { title, command: id, arguments: args, tooltip });
        if (hunk.state === 'pending') {
          lenses.push(
            lens('Keep', 'agentls.client.keep', [review.id, hunk.index], `Keep change ${number} from ${agent}`),
            lens('Undo', 'agentls.client.undo', [review.id, hunk.index], `Undo change ${number} from ${agent}`),
          );
        } else if (goesBack(review)) {
          lenses.push(lens('Keep (you edited it since)', 'agentls.client.keep', [review.id, hunk.index]));
        } else {
          lenses.push(
            lens('Conflict: Undo', 'agentls.client.undo', [review.id, hunk.index], 'You edited these lines since: this change cannot be applied as proposed'),
            lens(`Ask ${agent} again`, 'agentls.client.rerequest', [review.id], `Reject it and ask ${agent} to propose it again`),
          );
        }
        // The whole review's, after the first change's own (the line stays short).
        if (hunk === open[0]) {
          if (open.length > 1) {
            lenses.push(
              lens(`Keep all (${open.length})`, 'agentls.client.keep', [review.id, undefined], `Keep every open change from ${agent} to this file`),
              lens(`Undo all (${open.length})`, 'agentls.client.undo', [review.id, undefined], `Undo every open change from ${agent} to this file`),
            );
          }
          lenses.push(lens('Diff', 'agentls.client.showDiff', [document.uri], `Show the changes from ${agent} in a diff editor`));
        }
      }
    }
    return lenses;
  }

  /** The review with `id`, wherever it is. */
  find(id) {
    for (const reviews of this.byUri.values()) {
      const review = reviews.find((r) => r.id === id);
      if (review) return review;
    }
    return undefined;
  }

  decorateAll() {
    for (const editor of vscode.window.visibleTextEditors) this.decorate(editor);
  }

  /** Tints the text each open change replaces and shows its new text after it. */
  decorate(editor) {
    const reviews = this.byUri.get(editor.document.uri.toString()) || [];
    const replaced = [];
    const inserted = [];
    for (const review of reviews) {
      for (const hunk of review.hunks) {
        if (!hunk.range || !['pending', 'conflict', 'approved'].includes(hunk.state)) continue;
        const r = range(hunk.range);
        // A proposal replaces the tinted text with its new text; a landed change is already in
        // the buffer, and Undo would bring back what was there.
        const landed = goesBack(review);
        if (!landed && !r.isEmpty && hunk.oldText !== hunk.newText) replaced.push(r);
        const lines = hunk.newText.replace(/\n$/, '').split('\n');
        const gone = lines.length === 1 && lines[0] === '';
        let text = landed ? (gone ? '(was: nothing)' : `(was: ${lines[0]}` ) : gone ? '(deleted)' : `→ ${lines[0]}`;
        if (lines.length > 1) text += `  (+${lines.length - 1} more line${lines.length > 2 ? 's' : ''})`;
        if (landed && !gone) text += ')';
        if (hunk.state === 'approved') text = `✓ kept ${text}`;
        const end = r.isEmpty || r.end.character > 0 ? r.end : r.end.translate(-1);
        const lineEnd = editor.document.lineAt(Math.min(end.line, editor.document.lineCount - 1)).range.end;
        inserted.push({ range: new vscode.Range(lineEnd, lineEnd), renderOptions: { after: { contentText: text } } });
      }
    }
    editor.setDecorations(this.replaced, replaced);
    editor.setDecorations(this.inserted, inserted);
  }

  diffUri(fileUri) {
    return fileUri.with({ scheme: DIFF_SCHEME });
  }

  /**
   * The file as it would be with every open change of its reviews kept: the current text with
   * each pending change's range replaced by its new text (for a landed change, by the text
   * the agent replaced).
   */
  otherSide(uri) {
    const fileUri = uri.with({ scheme: 'file' });
    const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === fileUri.toString());
    if (!document) return '';
    const edits = [];
    for (const review of this.byUri.get(fileUri.toString()) || []) {
      for (const hunk of review.hunks) {
        if (!hunk.range || !['pending', 'approved'].includes(hunk.state)) continue;
        const r = range(hunk.range);
        // A landed change's hunk holds the way back: either way its new text is the other side.
        edits.push({ start: document.offsetAt(r.start), end: document.offsetAt(r.end), text: hunk.newText });
      }
    }
    edits.sort((a, b) => b.start - a.start);
    let text = document.getText();
    for (const edit of edits) text = text.slice(0, edit.start) + edit.text + text.slice(edit.end);
    return text;
  }

  /** Opens the diff of the file's open changes: what you have on the left, the other side right. */
  async showDiff(fileUri) {
    const uri = fileUri || (vscode.window.activeTextEditor && vscode.window.activeTextEditor.document.uri);
    if (!uri || !this.byUri.has(uri.toString())) {
      vscode.window.showInformationMessage('agentls: no pending changes in this file');
      return;
    }
    const reviews = this.byUri.get(uri.toString());
    const landed = reviews.every(goesBack);
    const name = uri.path.split('/').pop();
    const right = this.diffUri(uri);
    if (landed) {
      await vscode.commands.executeCommand('vscode.diff', right, uri, `${name}: before ↔ after the agent's changes`);
    } else {
      await vscode.commands.executeCommand('vscode.diff', uri, right, `${name} ↔ proposed changes`);
    }
  }

  /** A quick pick of every pending change; the chosen one is revealed in its file. */
  async pick() {
    const open = this.open();
    if (!open.length) {
      vscode.window.showInformationMessage('agentls: no pending changes');
      return;
    }
    const items = open.map(({ uri, review, hunk }) => {
      const file = vscode.Uri.parse(uri);
      const r = range(hunk.range);
      const removed = hunk.oldText ? hunk.oldText.replace(/\n$/, '').split('\n').length : 0;
      const added = hunk.newText ? hunk.newText.replace(/\n$/, '').split('\n').length : 0;
      const agent = review.origin && review.origin.label ? review.origin.label : 'agent';
      return {
        label: `${vscode.workspace.asRelativePath(file)}:${r.start.line + 1}`,
        description: `−${removed} +${added} · ${agent}${hunk.state === 'conflict' ? ' · conflict' : ''}`,
        detail: firstLine(goesBack(review) ? hunk.oldText : hunk.newText),
        file,
        range: r,
      };
    });
    const chosen = await vscode.window.showQuickPick(items, {
      title: 'agentls: pending changes',
      placeHolder: 'Pick a change to show it',
      matchOnDescription: true,
      matchOnDetail: true,
    });
    if (chosen) {
      const editor = await vscode.window.showTextDocument(chosen.file, { selection: new vscode.Range(chosen.range.start, chosen.range.start) });
      editor.revealRange(chosen.range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    }
  }
}

function firstLine(text) {
  const line = (text || '').split('\n')[0];
  return line ? `+ ${line}` : '(deletion)';
}

function range(r) {
  return new vscode.Range(r.start.line, r.start.character, r.end.line, r.end.character);
}

module.exports = { Reviews };
