// The whole conversation in VS Code (code-server): open the chat from the palette, prompt the
// demo agent from the palette (an input box), watch its reply stream into the chat beside the
// code, list its two proposed changes and see them in the diff editor, keep one and undo the
// other with the CodeLens, undo a change it made without asking, pick a mode and read the status in quick picks, cancel a turn from
// its progress notification, bring the chat back from the status bar and send a message typed in
// an input box, prompt about selected lines, find the first chat again after a new one, save
// and close everything without a dialog. Prints the result as
// one JSON line (driver.js).
const fs = require('fs');
const { main } = require('./driver');

main(async (d, config) => {
  const file = config.file;
  const name = file.split('/').pop();
  const count = (list, title) => list.filter((t) => t === title).length;
  await d.quickOpen(name);
  await d.waitUntil('the status bar names the demo agent', (s) => s.statusBar.some((t) => /demo · (idle|not started)/.test(t)));

  await d.palette('agentls: Open Chat');
  await d.waitUntil('the chat is open beside the code', (s) =>
    s.groups.length === 2 && s.groups[0].tab.startsWith(name) && s.groups[1].text.includes('# Chat with demo'));
  await d.shot('01-chat-beside');

  // The prompt goes from the code editor: click into it again, as a user would.
  await d.focusEditor(0);
  await d.palette('agentls: Prompt Agent');
  await d.answerInput('agentls: prompt demo', config.prompt);

  await d.waitUntil("the demo agent's reply streams into the chat", (s) =>
    s.groups[1].text.includes('Hello from the demo agent.') && s.groups[1].text.includes('proposes'));
  await d.waitUntil('a Keep and an Undo CodeLens on each of the two changes', (s) => {
    const lenses = s.groups[0].lenses;
    return count(lenses, 'Keep') === 2 && count(lenses, 'Undo') === 2 && lenses.includes('Keep all (2)');
  });
  await d.shot('02-reply-and-codelens');

  await d.palette('agentls: Pending Reviews');
  await d.waitUntil('the quick pick lists both changes', (s) =>
    s.quickInput.includes(`${name}:2`) && s.quickInput.includes(`${name}:6`));
  await d.page.keyboard.press('Escape');

  await d.clickLens('Diff', 0);
  // (Side by side or inline, as the editor's width makes it: both sides are in its text.)
  const diff = await d.waitFor('the diff editor: the file and the file with both changes kept', () => {
    const editor = document.querySelector('.monaco-diff-editor');
    const text = editor ? editor.innerText.replace(/\u00a0/g, ' ') : '';
    return ['// TODO one', '// TODO ONE', '// TODO two', '// TODO TWO'].every((t) => text.includes(t)) ? text : null;
  });
  await d.shot('03-diff');
  await d.palette('View: Close Editor');
  await d.waitUntil('the file is back in front', (s) => s.groups[0].tab.startsWith(name) && s.groups[0].lenses.includes('Keep'));

  await d.clickLens('Keep', 0);
  await d.waitUntil('the first change is kept, the second still open', (s) =>
    count(s.groups[0].lenses, 'Keep') === 1 && !s.groups[0].lenses.includes('Keep all (2)'));
  await d.clickLens('Undo', 0);
  await d.waitUntil('the kept change is in the buffer and no CodeLens is left', (s) =>
    config.expectVisible.every((line) => s.groups[0].text.includes(line)) && s.groups[0].lenses.length === 0);
  await d.waitUntil("the agent's turn is over in the chat", (s) => s.groups[1].text.includes('demo: end_turn'));
  await d.shot('04-kept-one-undid-one');

  // A change made without asking (the demo agent's @unasked) is in the buffer already: its
  // CodeLens offers to keep it or undo it; Undo brings the old line back.
  await d.focusEditor(0);
  await d.palette('agentls: Prompt Agent');
  await d.answerInput('agentls: prompt demo', `@unasked ${config.prompt}`);
  await d.waitUntil('the change made without asking, in the buffer with Keep and Undo', (s) =>
    s.groups[0].text.includes('// TODO TWO') && s.groups[0].lenses.includes('Keep') && s.groups[0].lenses.includes('Undo'));
  await d.shot('05-changed-without-asking');
  await d.clickLens('Undo', 0);
  await d.waitUntil('the old line back and no CodeLens left', (s) =>
    config.expectVisible.every((line) => s.groups[0].text.includes(line)) && s.groups[0].lenses.length === 0);

  await d.palette('agentls: Set Mode');
  await d.waitUntil("the quick pick offers the demo agent's modes", (s) =>
    s.quickInput.includes("demo's mode") && /read-only/i.test(s.quickInput));
  await d.page.keyboard.type('read-only');
  await d.page.keyboard.press('Enter');
  // The command is answered before the agent has the mode; agentls says when it does.
  await d.waitUntil('the status bar says the mode is set', (s) =>
    s.statusBar.some((t) => t.includes('demo: mode is now read-only')));
  await d.palette('agentls: Show Status');
  const status = await d.waitUntil('the status says the mode', (s) =>
    s.quickInput.includes('demo (default)') && s.quickInput.includes('mode read-only') && s.quickInput);
  await d.shot('06-status');
  await d.page.keyboard.press('Escape');

  // A turn that waits until cancelled, cancelled from its progress notification.
  await d.focusEditor(0);
  await d.palette('agentls: Prompt Agent');
  await d.answerInput('agentls: prompt demo', '@hang');
  await d.waitUntil('the turn runs', (s) =>
    s.groups[1].text.includes('Waiting until you cancel') && s.notifications.some((n) => n.includes('agentls: demo')));
  await d.shot('07-turn-running');
  await d.waitFor("the progress notification's Cancel, clicked", () => {
    const toast = [...document.querySelectorAll('.notification-toast')].find((t) => t.innerText.includes('agentls: demo'));
    const button = toast && [...toast.querySelectorAll('.monaco-button')].find((b) => b.innerText.trim() === 'Cancel');
    if (button) button.click();
    return !!button;
  });
  await d.waitUntil('the turn is cancelled and the status bar idle', (s) =>
    s.groups[1].text.includes('demo: cancelled') && s.statusBar.some((t) => t.includes('demo · idle')));

  // The status bar item brings the chat back; Send Chat Message asks for the message.
  await d.focusEditor(1);
  await d.waitUntil('the chat is saved', (s) => !s.groups[1].dirty);
  await d.palette('View: Close Editor');
  await d.waitUntil('the chat is closed', (s) => s.groups.length === 1 || s.groups[1].tabs === 0);
  await d.page.click('.statusbar-item[id$="agentls.status"] a, .statusbar-item[id$="agentls.status"]');
  await d.waitUntil('the chat is open beside the code again', (s) =>
    s.groups.length === 2 && s.groups[1].text.includes('demo: cancelled'));
  await d.palette('agentls: Send Chat Message');
  await d.answerInput('agentls: message to demo', 'read notes.rs');
  await d.waitUntil('the reply to the message', (s) => /read notes\.rs[\s\S]*has 7 lines[\s\S]*demo: end_turn/.test(s.groups[1].text));

  // A prompt about the selected lines: they go along as the context.
  await d.focusEditor(0);
  await d.ctrl('Home');
  for (let i = 0; i < 3; i++) {
    await d.page.keyboard.down('Shift');
    await d.page.keyboard.press('ArrowDown');
    await d.page.keyboard.up('Shift');
  }
  await d.palette('agentls: Prompt Agent');
  await d.answerInput('the selection in notes.rs goes along', 'read notes.rs');
  await d.waitUntil('the agent got the 3 selected lines', (s) => /notes\.rs: 3 lines[\s\S]*demo: end_turn/.test(s.groups[1].text));
  await d.shot('08-selection-prompt');

  // A new chat, then the first one found again by its first message.
  await d.palette('agentls: New Chat');
  await d.waitUntil('a new, empty chat beside the code', (s) =>
    s.groups.length === 2 && s.groups[1].text.includes('# Chat with demo') && !s.groups[1].text.includes('demo: end_turn'));
  await d.palette('agentls: Find Chat');
  const chats = await d.waitUntil('the quick pick lists both chats', (s) =>
    s.quickInput.includes(config.prompt) && s.quickInput.includes('(no message yet)') && s.quickInput);
  await d.page.keyboard.type('uppercase');
  await d.page.keyboard.press('Enter');
  await d.waitUntil('the first chat is back beside the code, where the new one was', (s) =>
    s.groups.length === 2 && s.groups[1].text.includes('notes.rs has 7 lines'));

  // With the panel open below (the chat's view gets shorter), a long reply is followed to its
  // end, and the turn leaves no notification of its own: its summary is on the status bar.
  // The panel opens on its terminal, which takes the focus once it is ready (later on a loaded
  // machine): a palette opened before that closes under it, its Enter going to the terminal.
  await d.palette('View: Toggle Panel Visibility');
  await d.waitFor('the panel open, its terminal focused', () => {
    const panel = document.querySelector('.part.panel');
    const focused = document.activeElement;
    return !!panel && panel.offsetHeight > 0 && panel.contains(focused) && focused.classList.contains('xterm-helper-textarea');
  });
  await d.palette('agentls: Send Chat Message');
  await d.answerInput('agentls: message to demo', '@flood 80');
  // The summary (on the status bar for 10 s) and the chat's end travel apart: either may come
  // first.
  let summaryBar = null;
  const followed = await d.waitUntil('the long reply followed to its end, its summary on the status bar', (s) => {
    if (!summaryBar && s.statusBar.some((t) => t.includes('demo: end_turn'))) summaryBar = s.statusBar;
    return /chunk 79[\s\S]*demo: end_turn/.test(s.groups[1].text) && summaryBar && s;
  });
  await d.shot('09-followed-with-panel');
  const turnNotifications = followed.notifications.filter((n) => n.includes('end_turn') || n.includes('chunk'));
  await d.palette('View: Toggle Panel Visibility');

  // Save the file (its tab shows it modified) and close everything: no dialog may ask anything.
  await d.focusEditor(0);
  await d.ctrl('KeyS');
  // The chat saves itself after each change; closing it meanwhile would ask.
  await d.waitUntil('the file and the chat are saved (no tab modified)', (s) => s.groups.every((g) => !g.dirty));
  const onDisk = fs.readFileSync(file, 'utf8');
  await d.palette('View: Close All Editors');
  await d.waitUntil('every editor is closed, or a dialog asks', (s) => s.dialog || s.groups.every((g) => g.tabs === 0));
  await d.shot('10-saved-and-closed');
  const { dialog } = await d.snapshot();
  return { onDisk, dialog, diff, status, chats, turnNotifications, statusBar: summaryBar };
});
