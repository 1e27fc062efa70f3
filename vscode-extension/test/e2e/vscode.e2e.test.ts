// End to end: the packaged .vsix in code-server (VS Code 1.100) in headless Chromium, against the
// real `mdsearch serve` of the project's environment (mdsearch.server.path), on a folder that is
// no vault, so it starts once *Enable mdsearch in this folder* sets mdsearch.enable. Search a paraphrase and open the hit, hover a heading for
// related sections, edit and save a note and find the new text, complete a link by meaning after
// [[, link a related section with a code action, open the related list from a heading's lens,
// and change a search setting without the server restarting.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CODE_SERVER, FIXTURE, MDSEARCH, SCREENSHOTS, VSIX } from './config';
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
    assert.ok(fs.existsSync(MDSEARCH), `mdsearch not found at ${MDSEARCH} (set MDSEARCH_PYTHON)`);
    fs.mkdirSync(RESULTS_DIR, { recursive: true });
    const indexDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mdsearch-e2e-index-'));
    session = await openSession({
      name: 'main',
      codeServer: CODE_SERVER,
      vsix: VSIX,
      fixture: FIXTURE,
      timed,
      settings: {
        'mdsearch.server.path': MDSEARCH,
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

  it('starts nothing in a folder that is no vault until "Enable mdsearch in this folder"', async () => {
    assert.equal(await wb.mdsearchStatus(), '', 'no mdsearch status item before it is enabled');
    await wb.runCommand('Markdown Search: Enable mdsearch in this folder');
    const settings = path.join(vault, '.vscode', 'settings.json');
    // VS Code creates the file, then writes the setting into it
    const written = (): Record<string, unknown> => JSON.parse(fs.readFileSync(settings, 'utf8')) as Record<string, unknown>;
    await waitFor('the folder setting written', () => Promise.resolve(written()['mdsearch.enable'] === true), 10_000);
  });

  it('then starts the server and indexes the folder (status bar shows the section count)', async () => {
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
    // a known filter with a value it cannot read (a word:value that names no filter is text)
    await wb.page.keyboard.type('tomatoes modified:lastweek', { delay: 10 });
    const row = wb.quickRows(/modified:lastweek: expected a date/);
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

  it('completes a link by meaning after [[ and inserts it', async () => {
    await wb.openFile('travel/japan-trip.md');
    await wb.page.locator('.editor-instance .view-lines').first().click();
    await wb.page.keyboard.press('Control+End');
    await wb.page.keyboard.press('Enter');
    await wb.page.keyboard.press('Enter');
    await wb.page.keyboard.type('Bring back seeds for the San Marzano plants we tie to stakes by the south fence: ', { delay: 5 });
    const rows = wb.page.locator('.suggest-widget .monaco-list-row');
    await timed('completion', async () => {
      await wb.page.keyboard.type('[[', { delay: 80 });
      await rows.filter({ hasText: 'garden' }).first().waitFor({ timeout: 30_000 });
    });
    const labels = await rows.allInnerTexts();
    log(`completion: ${labels.map((l) => l.replace(/\s+/g, ' ').slice(0, 60)).join(' | ')}`);
    assert.match(labels[0] ?? '', /garden/, 'the note the paragraph is about comes first');
    await wb.screenshot('vscode-completion.png');
    await wb.page.keyboard.press('Enter');
    const line = await waitFor('the link in the text', async () => {
      const lines = await wb.page.locator('.editor-instance .view-line').allInnerTexts();
      return lines.map((l) => l.replace(/\u00a0/g, ' ')).find((l) => l.includes('[[garden'));
    }, 10_000);
    log(`inserted: ${line}`);
    // The whole "[[" and the "]]" VS Code closed it with are replaced by one link.
    assert.match(line, /fence: \[\[garden(#[^\]]+)?\]\]$/);
  });

  it('offers to link a related section that is not linked yet', async () => {
    await wb.openFile('cooking/recipes.md');
    await wb.page.locator('.editor-instance .view-line', { hasText: 'Use ripe San Marzano' }).first().click();
    const action = wb.page.locator('.action-widget .monaco-list-row', { hasText: 'Link to garden#Tomatoes' });
    await timed('code-action', () =>
      waitFor('the "Link to" code action', async () => {
        await wb.page.keyboard.press('Control+.');
        try {
          await action.first().waitFor({ timeout: 4000 });
          return true;
        } catch {
          await wb.page.keyboard.press('Escape');
          return false;
        }
      }, 60_000, 500),
    );
    await wb.screenshot('vscode-link-action.png');
    // The keyboard, as a user would (the menu's pointer guard swallows a synthetic click).
    for (let i = 0; i < 10; i++) {
      const focused = wb.page.locator('.action-widget .monaco-list-row.focused');
      if ((await focused.count()) > 0 && (await focused.first().innerText()).includes('Link to garden#Tomatoes')) break;
      await wb.page.keyboard.press('ArrowDown');
    }
    await wb.page.keyboard.press('Enter');
    const line = await waitFor('the link at the end of the section', async () => {
      const lines = await wb.page.locator('.editor-instance .view-line').allInnerTexts();
      return lines.map((l) => l.replace(/\u00a0/g, ' ')).find((l) => l.startsWith('See also: '));
    }, 10_000);
    assert.equal(line.trim(), 'See also: [[garden#Tomatoes]]');
  });

  it('opens the related list from a heading\'s "related · linked" lens', async () => {
    await wb.openFile('garden.md');
    const lens = wb.page.locator('.contentWidgets .codelens-decoration a', { hasText: /related · \d+ linked/ });
    await timed('code-lens', () => lens.first().waitFor({ timeout: 60_000 }));
    const titles = await lens.allInnerTexts();
    log(`lenses: ${titles.join(' | ')}`);
    const tomatoes = lens.filter({ hasText: /^[1-9]/ }).first();
    const count = Number(/^(\d+)/.exec(await tomatoes.innerText())?.[1]);
    await tomatoes.click();
    await wb.quickRows().first().waitFor({ timeout: 15_000 });
    const rows = await waitFor('the related rows', async () => {
      const r = await wb.quickRows().allInnerTexts();
      return r.length === count ? r : undefined;
    }, 15_000);
    assert.ok(rows.every((r) => !r.includes('garden.md')), `other notes only: ${rows.join(' | ')}`);
    await wb.screenshot('vscode-related-lens.png');
    await wb.closeQuickInput();
  });

  it('applies a search setting without restarting the server', async () => {
    assert.ok(session);
    /** The server's pid, as "Show Index Status" reports it. */
    // The status pick is opened again when it did not show (a palette still closing after the
    // previous command swallowed it once in a CI run), as runCommand retries the palette itself.
    const serverPid = async (): Promise<number> => {
      const pid = await wb.retry('read the server pid from the index status', async () => {
        await wb.runCommand('Markdown Search: Show Index Status');
        const row = wb.quickRows('Show logs').first();
        await row.waitFor({ timeout: 10_000 });
        return Number(/server pid (\d+)/.exec(await row.innerText())?.[1]);
      });
      await wb.closeQuickInput();
      assert.ok(pid > 0, 'the status reports the server pid');
      return pid;
    };
    /** How many sections "Search Notes" lists for a query (once the list has settled on `want`). */
    const resultRows = async (want: (n: number) => boolean): Promise<number> =>
      waitFor('the search rows', async () => {
        await wb.runCommand('Markdown Search: Search Notes');
        await wb.quickInputBox.waitFor({ state: 'visible' });
        await wb.page.keyboard.type('tomatoes', { delay: 10 });
        try {
          await wb.quickRows(/Tomato/).first().waitFor({ timeout: 5000 });
          const n = await wb.quickRows().count();
          return want(n) ? n : undefined;
        } finally {
          await wb.closeQuickInput();
        }
      }, 60_000, 500);
    const pid = await serverPid();
    const before = await resultRows((n) => n >= 2);
    log(`server pid ${pid}; "tomatoes" lists ${before} sections`);
    const file = path.join(session.server.userDataDir, 'User', 'settings.json');
    const settings = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
    await timed('setting-applied-live', async () => {
      // Edit settings.json in the editor, as a user would: the extension sends
      // didChangeConfiguration and the server pulls the new value.
      await wb.runCommand('Preferences: Open User Settings (JSON)');
      await wb.activeTab('settings.json');
      await wb.page.locator('.editor-instance .view-lines').first().click();
      await wb.page.keyboard.press('Control+a');
      await wb.page.keyboard.insertText(JSON.stringify({ ...settings, 'mdsearch.maxResults': 1 }, null, 2));
      await wb.page.keyboard.press('Control+s');
      await wb.page.locator('.tabs-container .tab.active.dirty').waitFor({ state: 'detached', timeout: 10_000 });
      await wb.runCommand('View: Close Editor');
      assert.equal(await resultRows((n) => n === 1), 1);
    });
    assert.equal(await serverPid(), pid, 'the same server process: the setting applied live');
    assert.match(await wb.mdsearchStatus(), /^\d[\d,]* sections?$/, 'never restarted or reindexed');
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
