// End to end, as a new user meets it: the packaged .vsix in code-server with no mdsearch anywhere
// (not on PATH, not in the tool folders, a fresh HOME), on the bundled examples vault (an
// Obsidian vault, so the extension starts by itself). One notification offers *Install mdsearch*;
// the test clicks it and the extension installs mdsearch-ls from a folder of wheels offline
// (MDSEARCH_WHEELHOUSE through pip's and uv's own variables), then starts the server.
//
// Then the "Search Notes" QuickPick must show the engine's hits in the engine's order, as plain
// text. VS Code re-sorts a QuickPick's rows whose label matches the typed text ahead of the rest,
// and those among themselves by name (microsoft/vscode #73904), so "security" listed "Security"
// above "Security incidents" and "Security protocols" whatever the engine ranked. Each query is
// typed into the real pick, the rows are read from the DOM in their on-screen order, and compared
// with `mdsearch search QUERY --format json -k K` of the installed program (the CLI, reading the
// same index): the one-ranking test's last front end.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { envProgram } from '../../src/discovery';
import { hitToItem } from '../../src/hits';
import type { Hit } from '../../src/protocol';
import { CODE_SERVER, VSIX, WHEELHOUSE } from './config';
import { EXTENSION_ROOT, log, openSession, type Session, waitFor, type Workbench } from './harness';

const run = promisify(execFile);

/** The bundled demo vault: 20 notes, many headings sharing words ("Security ...", "Notes"). */
const VAULT = path.resolve(EXTENSION_ROOT, '..', 'examples', 'vault');
/** The one-ranking test's queries and k (tests/lsp/one_ranking_queries.json): the CLI, the
 * language server (workspace/symbol and mdsearch.search) and the MCP server are checked against
 * each other there, and the QuickPick against the CLI here. They include words that name several
 * headings ("security", "notes"), which VS Code's own sort used to pull up and order by name. */
const SHARED = JSON.parse(
  fs.readFileSync(path.resolve(EXTENSION_ROOT, '..', 'tests', 'lsp', 'one_ranking_queries.json'), 'utf8'),
) as { k: number; queries: string[] };
/** Results per search: the pick shows this many rows (mdsearch.maxResults), the CLI gets -k K. */
const K = SHARED.k;
/** Those queries, and two more paraphrases that share no heading's words. */
const QUERIES = [
  ...SHARED.queries,
  'how do we write up what went wrong after an outage',
  'can I work from Spain for a month',
];

/** A row as the pick shows it: the label's text (the icon is an element, not text), the
 * description (parent headings and path) and the detail (a line of the section's text). */
interface Row {
  label: string;
  description: string;
  detail: string;
}

const rowKey = (r: Pick<Row, 'label' | 'description'>): string => `${r.label} | ${r.description}`;

/** Markdown a row's text must not show: strong emphasis, code, wikilinks, links. */
const MARKUP = /\*\*|`|\[\[|\]\(/;

/** The section's lines in its note, as written. */
function sectionText(vault: string, hit: Hit): string {
  return fs.readFileSync(path.join(vault, hit.path), 'utf8').split('\n').slice(hit.start_line, hit.end_line + 1).join('\n');
}

/** Whether the row's text reads as the CLI's. Both are cut from the section's plain text: the
 * row's from its top, the CLI's around the query's words. Where the CLI's starts at the top too
 * (no leading ellipsis) they agree on the words both have (the last of either may be cut);
 * a window further down shares no words to compare, and only the markup check applies. */
function sameWords(row: string, cli: string): boolean {
  if (cli.startsWith('…')) return true;
  const words = (s: string): string[] => s.replace(/…/g, ' ').replace(/ · /g, ' ').split(/\s+/).filter(Boolean);
  const a = words(row);
  const b = words(cli);
  const n = Math.min(a.length, b.length) - 1;
  return a.slice(0, n).join(' ') === b.slice(0, n).join(' ');
}

/** The CLI's hits for each query, in its order, from the same index the editor's server wrote. */
async function cliHits(mdsearch: string, vault: string, indexDir: string): Promise<Map<string, Hit[]>> {
  const input = QUERIES.map((query) => JSON.stringify({ query })).join('\n') + '\n';
  const child = run(
    mdsearch,
    // the editor's server holds the index, so it answers the CLI too: the same ranking asked
    // through the channel, which the QuickPick must show unchanged
    ['search', '--queries', '-', '--format', 'json',
      '-k', String(K),
      '--root', vault, '--index-dir', indexDir],
    { timeout: 120_000, env: { ...process.env, ANONYMIZED_TELEMETRY: 'False' } },
  );
  child.child.stdin?.end(input);
  const { stdout } = await child;
  const out = new Map<string, Hit[]>();
  for (const line of stdout.split('\n').filter((l) => l.trim())) {
    const o = JSON.parse(line) as { query: string; results: Omit<Hit, 'uri' | 'root'>[] };
    out.set(o.query, o.results.map((h) => ({ ...h, uri: '', root: vault })));
  }
  return out;
}

/** The rows on screen, top to bottom (the list is virtual: DOM order is not screen order). */
async function shownRows(wb: Workbench): Promise<{ rows: Row[]; busy: boolean }> {
  // a string, so the test's tsconfig needs no DOM types
  return wb.page.evaluate<{ rows: Row[]; busy: boolean }>(`(() => {
    const widget = document.querySelector('.quick-input-widget');
    const progress = widget && widget.querySelector('.quick-input-progress');
    const busy = !!progress && progress.classList.contains('active');
    const rows = [...(widget ? widget.querySelectorAll('.quick-input-list .monaco-list-row') : [])]
      .map((el) => ({
        index: Number(el.getAttribute('data-index')),
        label: (el.querySelector('.label-name')?.textContent ?? '').trim(),
        description: (el.querySelector('.label-description')?.textContent ?? '').trim(),
        detail: (el.querySelector('.quick-input-list-label-meta .label-name')?.textContent ?? '').trim(),
      }))
      .sort((a, b) => a.index - b.index)
      .map(({ label, description, detail }) => ({ label, description, detail }));
    return { rows, busy };
  })()`);
}

/** Puts `query` in the open pick in one input event, from an empty pick: typed a key at a time
 * on a busy machine, a pause mid-word searched "revenue trackin", whose rows (the same sections
 * in another order) then passed for the answer to "revenue tracking". */
async function enterQuery(wb: Workbench, query: string): Promise<void> {
  await wb.quickInputBox.fill('');
  await waitFor('the pick emptied', async () => ((await shownRows(wb)).rows.length === 0 ? true : undefined), 10_000, 50);
  await wb.quickInputBox.fill(query);
}

/** code-server's environment: no mdsearch to find, the wheel folder as the only index. */
function offlineEnvironment(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    // the places discovery looks, and any pip, uv or virtualenv setting of this machine
    if (/^(PIP_|UV_|PIPX_|VIRTUAL_ENV$|XDG_BIN_HOME$|PYTHONPATH$)/.test(k)) continue;
    env[k] = v;
  }
  const sep = process.platform === 'win32' ? ';' : ':';
  const exe = process.platform === 'win32' ? 'mdsearch.exe' : 'mdsearch';
  env.PATH = (process.env.PATH ?? '').split(sep).filter((d) => d && !fs.existsSync(path.join(d, exe))).join(sep);
  // A fresh HOME: no ~/.local/bin/mdsearch from an earlier pipx or uv install. pyenv's shims
  // find their root through HOME, so it is kept.
  const pyenv = process.env.PYENV_ROOT ?? path.join(os.homedir(), '.pyenv');
  if (fs.existsSync(pyenv)) env.PYENV_ROOT = pyenv;
  env.HOME = home;
  env.USERPROFILE = home;
  return {
    ...env,
    PIP_CONFIG_FILE: os.devNull, // this machine's pip.conf (its own indexes, constraints) aside
    PIP_NO_INDEX: '1',
    PIP_FIND_LINKS: WHEELHOUSE,
    UV_NO_CONFIG: '1',
    UV_OFFLINE: '1',
    UV_FIND_LINKS: WHEELHOUSE,
  };
}

describe('Install mdsearch, then Search Notes in the engine\'s order (code-server)', { timeout: 900_000 }, () => {
  let session: Session | undefined;
  let wb: Workbench;
  let indexDir: string;
  let home: string;
  let expected: Map<string, Hit[]>;

  before(async () => {
    assert.ok(fs.existsSync(CODE_SERVER), `code-server not found at ${CODE_SERVER}`);
    assert.ok(fs.existsSync(VSIX), `${VSIX} missing: run npm run package first`);
    assert.ok(
      fs.existsSync(WHEELHOUSE) && fs.readdirSync(WHEELHOUSE).some((f) => /^mdsearch_ls-.*\.whl$/.test(f)),
      `no mdsearch_ls wheel in ${WHEELHOUSE} (set MDSEARCH_WHEELHOUSE; scripts/dist.sh makes dist/wheelhouse)`,
    );
    indexDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mdsearch-e2e-order-index-'));
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'mdsearch-e2e-home-'));
    session = await openSession({
      name: 'order',
      codeServer: CODE_SERVER,
      vsix: VSIX,
      fixture: VAULT,
      env: offlineEnvironment(home),
      settings: { 'mdsearch.indexDir': indexDir, 'mdsearch.maxResults': K },
    });
    wb = session.wb;
  });

  after(async () => {
    await session?.close();
    for (const dir of [indexDir, home]) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('offers Install mdsearch once, installs it offline and starts the server', async () => {
    assert.ok(session);
    const offer = wb.page.locator('.notification-toast', { hasText: 'needs the mdsearch program' });
    await offer.first().waitFor({ timeout: 60_000 });
    assert.equal(await offer.count(), 1, 'one notification');
    await wb.screenshot('install-offer.png');
    const started = Date.now();
    await offer.getByRole('button', { name: 'Install mdsearch' }).click();
    await wb.page.locator('.notification-toast', { hasText: 'Installing mdsearch' }).first().waitFor({ timeout: 30_000 });
    const env = path.join(session.userDataDir, 'User', 'globalStorage', 'mdsearch.mdsearch', 'env');
    const mdsearch = envProgram(env, process.platform, 'mdsearch');
    await waitFor('mdsearch installed', () => Promise.resolve(fs.existsSync(mdsearch)), 600_000, 1000);
    log(`installed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    await waitFor('the vault indexed', async () => {
      const t = await wb.mdsearchStatus();
      if (/error/.test(t) && !(await wb.page.locator('.notification-toast', { hasText: 'Installing mdsearch' }).count())) {
        throw new Error(`status bar: ${t}`);
      }
      return /^\d[\d,]* sections?$/.test(t) ? t : undefined;
    }, 600_000, 500);
    log(`installed, started and indexed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expected = await cliHits(mdsearch, session.vault, indexDir);
  });

  it('shows, for each query typed, exactly the CLI\'s hits in the CLI\'s order', async () => {
    assert.ok(expected, 'mdsearch was installed');
    await wb.runCommand('Markdown Search: Search Notes');
    await wb.quickInputBox.waitFor({ state: 'visible' });
    const mismatches: string[] = [];
    const marked: string[] = [];
    const differ: string[] = [];
    let sections = 0;
    let withMarkup = 0;
    for (const query of QUERIES) {
      const hits = expected.get(query);
      assert.ok(hits && hits.length > 0, `the CLI found nothing for ${JSON.stringify(query)}`);
      const want = hits.map((h) => {
        const item = hitToItem(h);
        return { label: item.label.replace(/^\$\([^)]*\)\s*/, ''), description: item.description ?? '' };
      });
      // Each row names one section (note, parent headings, title), so the same rows mean the
      // same sections, and so the same lines as the CLI's.
      assert.equal(new Set(want.map(rowKey)).size, want.length, `two hits look alike for ${query}`);
      await enterQuery(wb, query);
      // The answer to this query is on screen once its sections are (in any order) and the pick
      // is no longer busy; then the order is what is checked.
      const wantSet = want.map(rowKey).sort().join('\n');
      const shown = await waitFor(`the hits for ${JSON.stringify(query)}`, async () => {
        const s = await shownRows(wb);
        return !s.busy && s.rows.map(rowKey).sort().join('\n') === wantSet ? s.rows : undefined;
      }, 30_000, 100);
      log(`${query}: ${shown.map((r) => r.label).join(' | ')}`);
      if (shown.map(rowKey).join('\n') !== want.map(rowKey).join('\n')) {
        mismatches.push(`${JSON.stringify(query)}\n  shown: ${shown.map((r) => r.label).join(' | ')}\n  CLI:   ${want.map((r) => r.label).join(' | ')}`);
      }
      for (const row of shown) {
        const hit = hits[want.findIndex((w) => rowKey(w) === rowKey(row))];
        if (!hit) continue;
        sections += 1;
        if (MARKUP.test(sectionText(session?.vault ?? '', hit))) withMarkup += 1;
        if (MARKUP.test(row.detail)) marked.push(`${JSON.stringify(query)} ${row.label}: ${row.detail}`);
        if (!sameWords(row.detail, hit.snippet)) {
          differ.push(`${row.label}\n  shown: ${row.detail}\n  CLI:   ${hit.snippet}`);
        }
      }
    }
    await wb.screenshot('order.png');
    assert.deepEqual(mismatches, [], `rows not in the engine's order:\n${mismatches.join('\n')}`);
    log(`${withMarkup} of the ${sections} rows are sections whose text has markdown markup`);
    assert.ok(withMarkup > 0, 'the queries reach sections with markup, so the plain text is tested');
    assert.deepEqual(marked, [], `rows showing markdown:\n${marked.join('\n')}`);
    // The server sends the section's first 200 characters of markdown with its line breaks gone,
    // so a code block's first line, a list's items and a table's rows, which the CLI tells apart,
    // run together in the row: counted, not failed (the server sending the plain text it
    // prints would close the gap).
    log(`${sections - differ.length} of ${sections} rows read word for word as the CLI's where both start at the section's top; the others:\n${differ.join('\n')}`);
  });

  it('opens the first row at its section on Enter', async () => {
    const query = 'security'; // a query whose order VS Code used to change
    const first = expected.get(query)?.[0];
    assert.ok(first);
    await enterQuery(wb, query);
    await waitFor('the first row', async () => {
      const s = await shownRows(wb);
      return !s.busy && s.rows.length === K && s.rows[0]?.label === first.title ? true : undefined;
    }, 30_000, 100);
    await wb.page.keyboard.press('Enter');
    await wb.quickInput.waitFor({ state: 'hidden' });
    await wb.activeTab(path.basename(first.path));
    await waitFor('the cursor on the heading', async () => {
      const s = await wb.cursorStatus();
      return s.startsWith(`Ln ${first.start_line + 1},`) ? s : undefined;
    }, 10_000);
  });
});
