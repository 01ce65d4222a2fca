// The whole conversation in VS Code (code-server): open the chat from the palette, prompt the
// demo agent from the palette (an input box), watch its reply stream into the chat beside the
// code, keep one of its two proposed changes and undo the other with the CodeLens, save and
// close everything without a dialog. Prints the result as one JSON line (driver.js).
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
  await d.page.click('.editor-group-container:first-child .view-lines');
  await d.palette('agentls: Prompt Agent');
  await d.answerInput('agentls: prompt demo', config.prompt);

  await d.waitUntil("the demo agent's reply streams into the chat", (s) =>
    s.groups[1].text.includes('Hello from the demo agent.') && s.groups[1].text.includes('proposes'));
  await d.waitUntil('a Keep and an Undo CodeLens on each of the two changes', (s) => {
    const lenses = s.groups[0].lenses;
    return count(lenses, 'Keep') === 2 && count(lenses, 'Undo') === 2 && lenses.includes('Keep all (2)');
  });
  await d.shot('02-reply-and-codelens');

  await d.clickLens('Keep', 0);
  await d.waitUntil('the first change is kept, the second still open', (s) =>
    count(s.groups[0].lenses, 'Keep') === 1 && !s.groups[0].lenses.includes('Keep all (2)'));
  await d.clickLens('Undo', 0);
  await d.waitUntil('the kept change is in the buffer and no CodeLens is left', (s) =>
    config.expectVisible.every((line) => s.groups[0].text.includes(line)) && s.groups[0].lenses.length === 0);
  await d.waitUntil("the agent's turn is over in the chat", (s) => s.groups[1].text.includes('demo: end_turn'));
  await d.shot('03-kept-one-undid-one');

  // Save the file (its tab shows it modified) and close everything: no dialog may ask anything.
  await d.page.click('.editor-group-container:first-child .view-lines');
  await d.ctrl('KeyS');
  await d.waitUntil('the file is saved (its tab no longer modified)', (s) => !s.groups[0].dirty);
  const onDisk = fs.readFileSync(file, 'utf8');
  await d.palette('View: Close All Editors');
  await d.waitUntil('every editor is closed, or a dialog asks', (s) => s.dialog || s.groups.every((g) => g.tabs === 0));
  await d.shot('04-saved-and-closed');
  const { dialog } = await d.snapshot();
  return { onDisk, dialog };
});
