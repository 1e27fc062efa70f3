// End to end: the packaged .vsix in code-server (VS Code 1.100) in headless Chromium, against the
// real `python -m mdsearch_ls serve`. Search a paraphrase and open the hit, hover a heading for
// related sections, edit and save a note and find the new text.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CODE_SERVER, FIXTURE, PYTHON, SCREENSHOTS, VSIX } from './config';
import { log, openSession, RESULTS_DIR, type Session, waitFor, type Workbench } from './harness';

/** Line (1-based) of a heading in a fixture note, for the "opened at that line" check. */
function headingLine(file: string, heading: string): number {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const index = lines.findIndex((l) => l.trim() === heading);
  assert.ok(index >= 0, `${heading} not in ${file}`);
  return index + 1;
}

const timings: Record<string, number> = {};
async function timed<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const start = Date.now();
  try {
    return await fn();
  } finally {
    timings[name] = Date.now() - start;
    log(`${name}: ${timings[name]} ms`);
  }
}

describe('mdsearch in VS Code (code-server)', { timeout: 300_000 }, () => {
  let session: Session | undefined;
  let vault: string;
  let wb: Workbench;

  before(async () => {
    assert.ok(fs.existsSync(CODE_SERVER), `code-server not found at ${CODE_SERVER} (run /work/shared/tools/install-code-server)`);
    assert.ok(fs.existsSync(VSIX), `${VSIX} missing: run npm run package first`);
    assert.ok(fs.existsSync(PYTHON), `Python not found at ${PYTHON} (set MDSEARCH_PYTHON)`);
    fs.mkdirSync(RESULTS_DIR, { recursive: true });
    const indexDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mdsearch-e2e-index-'));
    session = await openSession({
      name: 'main',
      codeServer: CODE_SERVER,
      vsix: VSIX,
      fixture: FIXTURE,
      timed,
      settings: {
        'mdsearch.server.pythonPath': PYTHON,
        'mdsearch.indexDir': indexDir,
        'mdsearch.trace.server': 'verbose',
      },
    });
    vault = session.vault;
    wb = session.wb;
  });

  after(async () => {
    fs.writeFileSync(path.join(RESULTS_DIR, 'timings.json'), JSON.stringify(timings, null, 2));
    await session?.close();
  });

  it('starts the server and indexes the vault (status bar shows the section count)', async () => {
    const seen = new Set<string>();
    let notified = false;
    const toast = wb.page.locator('.notification-toast', { hasText: 'mdsearch: indexing notes' });
    const text = await timed('first-index', () =>
      waitFor('the status bar to show the section count', async () => {
        const t = await wb.mdsearchStatus();
        if (/error/.test(t)) throw new Error(`status bar: ${t}`);
        const state = t.replace(/\d+%/, 'N%');
        if (!seen.has(state)) log(`status bar: ${t}`);
        seen.add(state);
        if (!notified && (await toast.count()) > 0) {
          notified = true;
          await wb.screenshot('first-index.png');
        }
        return /^\d[\d,]* sections?$/.test(t) ? t : undefined;
      }, 180_000, 200),
    );
    log(`first-index notification seen: ${notified}`);
    log(`status bar: ${text}`);
    const count = Number(text.replace(/\D/g, ''));
    assert.ok(count >= 10, `expected at least 10 sections, got ${text}`);
  });

  it('finds a section from a paraphrased query and opens it at its heading', async () => {
    const line = headingLine(path.join(vault, 'garden.md'), '## Watering schedule');
    await timed('search', async () => {
      await wb.runCommand('Markdown Search: Search Notes');
      await wb.quickInputBox.waitFor({ state: 'visible' });
      await wb.page.keyboard.type('how often should I irrigate the vegetable beds', { delay: 15 });
      await wb.quickRows('Watering schedule').first().waitFor({ timeout: 20_000 });
    });
    const rows = await wb.quickRows().allInnerTexts();
    log(`hits: ${rows.map((r) => r.replace(/\s+/g, ' ').slice(0, 80)).join(' | ')}`);
    assert.ok(rows.some((r) => r.includes('garden.md')), 'the hit shows its path');
    // the active row is previewed in the editor while the pick stays open
    await wb.page.locator('.tabs-container .tab', { hasText: 'garden.md' }).waitFor({ timeout: 10_000 });
    assert.equal(await wb.quickInput.isVisible(), true, 'the preview keeps the pick open');
    await wb.page.waitForTimeout(300); // let the preview editor paint for the screenshot
    await wb.screenshot('vscode-search.png');
    await wb.focusRow('Watering schedule');
    await wb.page.keyboard.press('Enter');
    await wb.quickInput.waitFor({ state: 'hidden' });
    await wb.activeTab('garden.md');
    const cursor = await waitFor('the cursor on the heading', async () => {
      const s = await wb.cursorStatus();
      return s.startsWith(`Ln ${line},`) ? s : undefined;
    }, 10_000);
    assert.match(cursor, /selected/, 'the section is selected');
    await wb.screenshot('opened-section.png');
  });

  it('shows a bad inline filter as a message in the pick, not as a crash', async () => {
    await wb.runCommand('Markdown Search: Search Notes');
    await wb.quickInputBox.waitFor({ state: 'visible' });
    await wb.page.keyboard.type('tomatoes colour:red', { delay: 10 });
    const row = wb.quickRows(/unknown filter 'colour:'/);
    await row.first().waitFor({ timeout: 15_000 });
    await wb.page.keyboard.press('Enter'); // an informational row does nothing
    assert.equal(await wb.quickInput.isVisible(), true, 'the pick stays open to fix the query');
    await wb.quickInputBox.fill('tomatoes tag:garden-nothing');
    await wb.quickRows(/No matching sections|Tomato/).first().waitFor({ timeout: 15_000 });
    await wb.closeQuickInput();
  });

  it('shows related sections from another note when hovering a heading', async () => {
    await wb.openFile('cooking/recipes.md');
    const heading = wb.page.locator('.editor-instance .view-line', { hasText: 'Tomato sauce' }).first();
    await heading.waitFor();
    const hover = wb.page.locator('.monaco-hover:not(.hidden)', { hasText: /Related sections/i });
    await timed('hover', () =>
      waitFor('the related-sections hover', async () => {
        await wb.page.mouse.move(5, 5);
        await heading.getByText('Tomato sauce').first().hover();
        await hover.first().waitFor({ state: 'visible', timeout: 4000 });
        return true;
      }, 45_000, 500),
    );
    const text = await hover.first().innerText();
    log(`hover: ${text.replace(/\s+/g, ' ').slice(0, 200)}`);
    assert.match(text, /garden/i, 'a section of garden.md is related to the tomato sauce recipe');
    await wb.page.waitForTimeout(600); // the hover fades in
    await wb.screenshot('vscode-hover.png');
    await wb.page.mouse.move(5, 5);
  });

  it('lists related sections for the section under the cursor', async () => {
    await wb.openFile('cooking/recipes.md');
    await wb.page.locator('.editor-instance .view-line', { hasText: 'Tomato sauce' }).first().getByText('Tomato sauce').first().click();
    await wb.runCommand('Markdown Search: Related Sections');
    await wb.quickRows('Tomatoes').first().waitFor({ timeout: 15_000 });
    const rows = await wb.quickRows().allInnerTexts();
    assert.ok(rows.every((r) => !r.includes('recipes.md')), `only other notes: ${rows.join(' | ')}`);
    await wb.screenshot('related.png');
    await wb.closeQuickInput();
    // Escape puts back the note the previews replaced, with the keyboard in its editor.
    await wb.activeTab('recipes.md');
    const focus = await waitFor('the keyboard in the editor', async () => {
      // a string, so the test's tsconfig needs no DOM types
      const f = await wb.page.evaluate<{ inEditor: boolean; chain: string }>(`(() => {
        const el = document.activeElement;
        const chain = [];
        for (let e = el; e && chain.length < 6; e = e.parentElement) chain.push(e.tagName + '.' + e.className);
        return { inEditor: !!(el && el.closest('.monaco-editor')), chain: chain.join(' < ') };
      })()`);
      log(`focus: ${f.chain}`);
      return f.inEditor ? f : undefined;
    }, 5000, 500).catch((e: unknown) => e);
    assert.ok(!(focus instanceof Error), String(focus));
  });

  it('indexes an edited note on save so the new text is found', async () => {
    await wb.openFile('finance/budget.md');
    await wb.page.locator('.editor-instance .view-lines').first().click();
    await wb.page.keyboard.press('Control+End');
    await wb.page.keyboard.press('Enter');
    await wb.page.keyboard.type(
      '## Emergency fund\n\nKeep six months of rent and bills in a separate account in case one of us loses their job.\n',
    );
    await wb.page.keyboard.press('Control+s');
    await wb.page.locator('.tabs-container .tab.active.dirty').waitFor({ state: 'detached', timeout: 10_000 });
    const found = await timed('save-then-search', () =>
      waitFor('the saved section in the results', async () => {
        await wb.runCommand('Markdown Search: Search Notes');
        await wb.quickInputBox.waitFor({ state: 'visible' });
        await wb.page.keyboard.type('money put aside in case we get laid off', { delay: 10 });
        try {
          await wb.quickRows('Emergency fund').first().waitFor({ timeout: 5000 });
          return true;
        } catch {
          await wb.closeQuickInput();
          return false;
        }
      }, 60_000, 1000),
    );
    assert.equal(found, true);
    await wb.screenshot('save-then-search.png');
    await wb.focusRow('Emergency fund');
    await wb.page.keyboard.press('Enter');
    await wb.activeTab('budget.md');
    assert.match(await wb.cursorStatus(), new RegExp(`^Ln ${headingLine(path.join(vault, 'finance/budget.md'), '## Emergency fund')},`));
  });

  it('restarts the server when a server setting changes', async () => {
    assert.ok(session);
    const file = path.join(session.server.userDataDir, 'User', 'settings.json');
    const settings = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
    await timed('restart-on-setting', async () => {
      // Edit settings.json in the editor, as a user would.
      await wb.runCommand('Preferences: Open User Settings (JSON)');
      await wb.activeTab('settings.json');
      await wb.page.locator('.editor-instance .view-lines').first().click();
      await wb.page.keyboard.press('Control+a');
      await wb.page.keyboard.insertText(JSON.stringify({ ...settings, 'mdsearch.mode': 'keyword' }, null, 2));
      await wb.page.keyboard.press('Control+s');
      await wb.page.locator('.tabs-container .tab.active.dirty').waitFor({ state: 'detached', timeout: 10_000 });
      await waitFor('the server to restart', async () => {
        const t = await wb.mdsearchStatus();
        return /stopped|starting|loading|indexing/.test(t) ? t : undefined;
      }, 20_000, 100);
      await waitFor('the index to be ready again', async () => {
        const t = await wb.mdsearchStatus();
        return /^\d[\d,]* sections?$/.test(t) ? t : undefined;
      }, 120_000, 250);
    });
  });

  // The README's screenshots are refreshed only on request, so a test run leaves the tree clean.
  it('took the search and hover screenshots (MDSEARCH_UPDATE_SCREENSHOTS=1 copies them to docs/)', () => {
    const update = process.env.MDSEARCH_UPDATE_SCREENSHOTS === '1';
    if (update) fs.mkdirSync(SCREENSHOTS, { recursive: true });
    for (const name of ['vscode-search.png', 'vscode-hover.png']) {
      const src = path.join(RESULTS_DIR, name);
      assert.ok(fs.existsSync(src) && fs.statSync(src).size > 10_000, `${name} was not taken`);
      if (update) fs.copyFileSync(src, path.join(SCREENSHOTS, name));
    }
  });
});
