// agentls not installed: the extension says so in a notification whose button opens the
// setting, instead of `spawn agentls ENOENT`; agentls starts once its full path is typed there;
// the Settings UI lists every agentls setting with its description. Prints the result as one JSON line (driver.js).
const { main } = require('./driver');

/** The settings the Settings editor shows now: `{key, title, description}` per row. */
async function visibleSettings(d) {
  return d.page.evaluate(() =>
    [...document.querySelectorAll('.settings-editor .setting-item-contents[data-key]')].map((row) => ({
      key: row.getAttribute('data-key'),
      title: row.querySelector('.setting-item-title').innerText.replace(/\s+/g, ' ').trim(),
      description: row.querySelector('.setting-item-description').innerText.trim(),
    })),
  );
}

/** Every setting the Settings editor lists, scrolling its list to the end. */
async function allSettings(d) {
  const seen = new Map();
  for (let i = 0, idle = 0; i < 40 && idle < 5; i++) {
    const before = seen.size;
    for (const s of await visibleSettings(d)) seen.set(s.key, s);
    idle = seen.size === before ? idle + 1 : 0;
    const box = await d.page.evaluate(() => {
      const r = document.querySelector('.settings-editor .settings-tree-container').getBoundingClientRect();
      return { x: r.left + r.width / 2, y: r.top + r.height / 2 };
    });
    await d.page.mouse.move(box.x, box.y);
    await d.page.mouse.wheel({ deltaY: 300 });
    // The list renders the rows it scrolled to on the next frames.
    await d.page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
  }
  return [...seen.values()];
}

main(async (d, config) => {
  const message = await d.waitUntil('a notification says agentls was not found', (s) =>
    s.notifications.find((n) => n.includes('agentls executable was not found')));
  const statusBar = (await d.snapshot()).statusBar;
  await d.shot('05-binary-not-found');
  // The toast slides in: click its button itself (a DOM click), not a point on the screen.
  await d.waitFor("the notification's Open Settings button, clicked", () => {
    const b = [...document.querySelectorAll('.notification-toast .monaco-button')].find((x) => x.innerText.trim() === 'Open Settings');
    if (b) b.click();
    return !!b;
  });
  await d.waitFor('the Settings editor at agentls.path', () =>
    !!document.querySelector('.settings-editor .setting-item-contents[data-key="agentls.path"]'));
  await d.shot('06-settings-path');
  const pathSettings = await visibleSettings(d);
  // The fix the message suggests: the full path in the setting; agentls starts at once.
  await d.waitFor('the agentls.path box, focused', () => {
    const input = document.querySelector('.settings-editor .setting-item-contents[data-key="agentls.path"] input');
    if (input) input.focus();
    return !!input && document.activeElement === input;
  });
  // Pasted, as one input (the Settings editor writes the setting as it changes).
  await d.ctrl('KeyA');
  await d.page.keyboard.sendCharacter(config.agentls);
  await d.waitUntil('agentls runs with the demo agent', (s) => s.statusBar.some((t) => /demo · (idle|not started)/.test(t)));
  await d.page.keyboard.press('Escape');
  await d.waitFor('the Settings editor closed', () => !document.querySelector('.settings-editor'));

  await d.palette('agentls: Open Settings');
  await d.waitFor('the Settings editor with the agentls settings', () =>
    document.querySelector('.settings-editor .search-container input, .settings-editor .suggest-input-container') &&
    document.querySelectorAll('.settings-editor .setting-item-contents[data-key^="agentls."]').length > 3 &&
    !document.querySelector('.settings-editor .setting-item-contents[data-key="agentls.path"]'));
  await d.shot('07-settings');
  const settings = await allSettings(d);
  return { message, statusBar, pathSettings, settings };
});
