// Drives code-server (VS Code in the browser) with headless Chromium through puppeteer-core, as a
// user would: the command palette, input boxes, CodeLens clicks, keyboard shortcuts. Shared by
// the scenarios in this folder. Every wait has a deadline and fails with a screenshot and what
// the page showed.
const { spawn } = require('child_process');
const fs = require('fs');
const path = require('path');

/** How long one step may wait for what it expects. */
const STEP_MS = Number(process.env.AGENTLS_TEST_VSCODE_STEP_MS || 60000);

class Driver {
  constructor(config) {
    this.config = config;
    this.steps = [];
    this.shots = [];
    this.serverOutput = '';
  }

  log(text) {
    this.steps.push(text);
    process.stderr.write(`[driver ${new Date().toISOString()}] ${text}\n`);
  }

  /** Starts code-server on a free loopback port and Chromium on the workspace. */
  async start() {
    const c = this.config;
    const args = [c.codeServer, '--auth', 'none', '--bind-addr', '127.0.0.1:0', '--disable-telemetry',
      '--disable-update-check', '--disable-workspace-trust', '--disable-getting-started-override',
      '--user-data-dir', c.userData, '--extensions-dir', c.extensions, c.workspace];
    this.server = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const url = await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`code-server did not listen:\n${this.serverOutput}`)), STEP_MS);
      const on = (data) => {
        this.serverOutput += data;
        const match = /HTTP server listening on (http:\/\/[\d.]+:\d+)\//.exec(this.serverOutput);
        if (match) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      };
      this.server.stdout.on('data', on);
      this.server.stderr.on('data', on);
      this.server.on('exit', (code) => reject(new Error(`code-server exited (${code}):\n${this.serverOutput}`)));
    });
    this.log(`code-server at ${url}`);
    const puppeteer = require(c.puppeteer);
    const [width, height] = c.viewport || [1400, 900];
    this.browser = await puppeteer.launch({
      executablePath: c.chromium,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', `--window-size=${width},${height}`,
        `--user-data-dir=${path.join(c.userData, 'chromium')}`],
      defaultViewport: { width, height },
      protocolTimeout: STEP_MS * 2,
    });
    this.page = await this.browser.newPage();
    this.page.on('dialog', (dialog) => {
      this.log(`browser dialog: ${dialog.message()}`);
      dialog.dismiss();
    });
    await this.page.goto(`${url}/?folder=${encodeURIComponent(c.workspace)}`);
    await this.waitFor('the workbench', () => !!document.querySelector('.monaco-workbench .part.editor'));
  }

  async stop() {
    if (this.browser) await this.browser.close().catch(() => undefined);
    if (this.server && this.server.exitCode === null) {
      // code-server and the extension host it started, and the agentls they started.
      try {
        process.kill(-this.server.pid, 'SIGTERM');
      } catch {
        // Gone already.
      }
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, 5000);
        this.server.on('exit', () => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** A PNG of the page, named `name`, in the captures folder. */
  async shot(name) {
    fs.mkdirSync(this.config.captures, { recursive: true });
    const file = path.join(this.config.captures, `${name}.png`);
    await this.page.screenshot({ path: file });
    this.shots.push(file);
    this.log(`screenshot ${file}`);
    return file;
  }

  /**
   * What the workbench shows, as plain data: each editor group with its active tab's label, its
   * text (visible lines), its CodeLens titles and whether its tab is modified; the status bar;
   * notifications; whether a dialog is open.
   */
  async snapshot() {
    return this.page.evaluate(() => {
      const text = (el) => (el ? el.innerText.replace(/\u00a0/g, ' ') : '');
      return {
        groups: [...document.querySelectorAll('.editor-group-container')].map((g) => {
          const tab = g.querySelector('.tab.active');
          return {
            tab: tab ? tab.getAttribute('aria-label') || '' : '',
            dirty: !!(tab && tab.classList.contains('dirty')),
            tabs: g.querySelectorAll('.tab').length,
            text: text(g.querySelector('.view-lines')),
            lenses: [...g.querySelectorAll('.codelens-decoration a')].map((a) => a.innerText.trim()),
          };
        }),
        statusBar: [...document.querySelectorAll('.statusbar-item')].map(text),
        notifications: [...document.querySelectorAll('.notification-toast')].map(text),
        dialog: text(document.querySelector('.monaco-dialog-box')) || null,
        quickInput: text(document.querySelector('.quick-input-widget:not([style*="display: none"])')),
      };
    });
  }

  /** Waits until `predicate(snapshot)` is truthy (polled); returns its value. */
  async waitUntil(what, predicate) {
    this.log(`wait until ${what}`);
    const deadline = Date.now() + STEP_MS;
    let last;
    for (;;) {
      last = await this.snapshot().catch(() => last);
      const value = last && predicate(last);
      if (value) return value;
      if (Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const shot = await this.shot(`failed-${this.steps.length}`).catch(() => '');
    throw new Error(`timed out waiting until ${what}; screenshot ${shot}; the workbench showed: ${JSON.stringify(last, null, 1)}`);
  }

  /**
   * Waits until `fn(arg)`, run in the page, is truthy (polled); returns its value. A page that
   * reloads meanwhile (the workbench does once at its start) is polled again, not a failure.
   */
  async waitFor(what, fn, arg) {
    this.log(`wait for ${what}`);
    const deadline = Date.now() + STEP_MS;
    let problem = 'not yet';
    for (;;) {
      try {
        const value = await this.page.evaluate(fn, arg);
        if (value) return value;
        problem = 'not yet';
      } catch (error) {
        problem = error.message;
      }
      if (Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const shot = await this.shot(`failed-${this.steps.length}`).catch(() => '');
    const last = await this.snapshot().catch(() => null);
    throw new Error(`timed out waiting for ${what} (${problem}); screenshot ${shot}; the workbench showed: ${JSON.stringify(last, null, 1)}`);
  }

  /**
   * Presses `key` (with Control when `control`) until the quick input is open and focused: a key
   * pressed while the workbench moves the focus can be swallowed, so it is pressed again after
   * 2 s, up to the step's deadline.
   */
  async openQuickInput(key, what, control) {
    const open = () => {
      const input = document.querySelector('.quick-input-widget .quick-input-box input');
      return !!input && document.activeElement === input;
    };
    const deadline = Date.now() + STEP_MS;
    for (;;) {
      if (control) await this.ctrl(key);
      else await this.page.keyboard.press(key);
      const until = Math.min(Date.now() + 2000, deadline);
      while (Date.now() < until) {
        if (await this.page.evaluate(open).catch(() => false)) return;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      if (Date.now() >= deadline) await this.waitFor(what, open);
      this.log(`${what} did not open: ${key} again`);
    }
  }

  /**
   * Runs a command from the palette (F1) by its label (a title ending in `…` may be given
   * without it): types it, moves to the row that is exactly it, and presses Enter.
   */
  async palette(label) {
    this.log(`palette: ${label}`);
    await this.openQuickInput('F1', 'the command palette');
    await this.page.keyboard.type(label);
    const focusedIs = (label) => {
      const rows = [...document.querySelectorAll('.quick-input-widget .monaco-list-row')];
      const is = (row) => {
        const text = row.getAttribute('aria-label') || '';
        return [label, `${label},`, `${label}…`].some((l) => text === l || text.startsWith(`${l},`) || text === l);
      };
      const focused = rows.find((row) => row.classList.contains('focused'));
      if (!rows.some(is)) return 'absent';
      return focused && is(focused) ? 'focused' : 'elsewhere';
    };
    await this.waitFor(`"${label}" in the palette`, (label) => {
      const rows = [...document.querySelectorAll('.quick-input-widget .monaco-list-row')];
      return rows.some((row) => {
        const text = row.getAttribute('aria-label') || '';
        return [label, `${label}…`].some((l) => text === l || text.startsWith(`${l},`));
      });
    }, label);
    for (let i = 0; i < 30 && (await this.page.evaluate(focusedIs, label)) !== 'focused'; i++) {
      await this.page.keyboard.press('ArrowDown');
    }
    await this.page.keyboard.press('Enter');
  }

  /** Waits for an input box (a quick input without a list) titled with `title`, types `text`. */
  async answerInput(title, text) {
    await this.waitFor(`the input box "${title}"`, (title) => {
      const widget = document.querySelector('.quick-input-widget');
      const input = widget && widget.querySelector('.quick-input-box input');
      return widget && widget.style.display !== 'none' && widget.innerText.includes(title) && document.activeElement === input;
    }, title);
    await this.page.keyboard.type(text);
    await this.page.keyboard.press('Enter');
  }

  /** Focuses the editor of group `index` (0-based, left to right): Ctrl+1, Ctrl+2… */
  async focusEditor(index) {
    await this.ctrl(`Digit${index + 1}`);
    await this.waitFor(`editor group ${index + 1} focused`, (index) => {
      const group = document.querySelectorAll('.editor-group-container')[index];
      return group && group.classList.contains('active') && group.contains(document.activeElement);
    }, index);
  }

  /** Presses a key with Control held. */
  async ctrl(key) {
    await this.page.keyboard.down('Control');
    await this.page.keyboard.press(key);
    await this.page.keyboard.up('Control');
  }

  /** Opens a workspace file with Quick Open (Ctrl+P). */
  async quickOpen(name) {
    this.log(`quick open ${name}`);
    await this.openQuickInput('KeyP', 'quick open', true);
    await this.page.keyboard.type(name);
    await this.waitFor(`${name} in quick open`, (name) => {
      const row = document.querySelector('.quick-input-widget .monaco-list-row.focused');
      return row && (row.getAttribute('aria-label') || '').includes(name);
    }, name);
    await this.page.keyboard.press('Enter');
    await this.waitFor(`the editor of ${name}`, (name) => {
      const tab = document.querySelector('.tab.active.selected');
      return tab && tab.getAttribute('aria-label') && tab.getAttribute('aria-label').startsWith(name);
    }, name);
  }

  /** Clicks the CodeLens titled `title`, the `nth` (0-based, top to bottom) of them. */
  async clickLens(title, nth) {
    // CodeLenses are laid out again as they resolve (a row may come or go above): the link is
    // clicked once it is where it was 100 ms before and is what the point hits.
    await this.page.evaluate(() => { window.agentlsLastLens = null; });
    const point = await this.waitFor(`CodeLens "${title}" #${nth + 1}, in place`, ([title, nth]) => {
      const links = [...document.querySelectorAll('.codelens-decoration a')]
        .filter((a) => a.innerText.trim() === title)
        .map((a) => ({ a, rect: a.getBoundingClientRect() }))
        .filter(({ rect }) => rect.width > 0)
        .sort((x, y) => x.rect.top - y.rect.top);
      const link = links[nth];
      const at = link && { x: link.rect.left + link.rect.width / 2, y: link.rect.top + link.rect.height / 2 };
      const hit = at && document.elementFromPoint(at.x, at.y);
      const here = hit && link.a.contains(hit) ? `${at.x},${at.y}` : null;
      const still = here !== null && window.agentlsLastLens === here;
      window.agentlsLastLens = here;
      return still ? at : null;
    }, [title, nth]);
    this.log(`click CodeLens "${title}" #${nth + 1}`);
    await this.page.mouse.click(point.x, point.y);
  }
}

/** Runs `scenario(driver)`, then prints one JSON line: `{ok, ...result}` or `{ok: false, error}`. */
async function main(scenario) {
  const config = JSON.parse(process.argv[2]);
  const driver = new Driver(config);
  let result;
  try {
    await driver.start();
    result = { ok: true, ...(await scenario(driver, config)) };
  } catch (error) {
    result = { ok: false, error: String(error && error.stack ? error.stack : error) };
  }
  await driver.stop();
  result.steps = driver.steps;
  result.screenshots = driver.shots;
  result.codeServer = driver.serverOutput.slice(-4000);
  process.stdout.write(`${JSON.stringify(result)}\n`);
  process.exit(result.ok ? 0 : 1);
}

module.exports = { Driver, main };
