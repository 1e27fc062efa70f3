// End to end: the "Search Notes" QuickPick shows the engine's hits in the engine's order. VS Code
// re-sorts a QuickPick's rows whose label matches the typed text ahead of the rest, and those
// among themselves by name (microsoft/vscode #73904), so "security" listed "Security" above
// "Security incidents" and "Security protocols" whatever the engine ranked. Here each query is
// typed into the real pick in code-server, the rows are read from the DOM in their on-screen
// order, and compared with `mdsearch search QUERY --format json -k K` (the CLI, reading the same
// index) for the bundled examples vault: the one-ranking test's last front end.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';
import { hitToItem } from '../../src/hits';
import type { Hit } from '../../src/protocol';
import { CODE_SERVER, PYTHON, VSIX } from './config';
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

/** A row as the pick shows it: the label's text (the icon is an element, not text) and the
 * description (parent headings and path). */
interface Row {
  label: string;
  description: string;
}

const rowKey = (r: Row): string => `${r.label} | ${r.description}`;

/** The CLI's hits for each query, in its order, from the same index the editor's server wrote. */
async function cliHits(vault: string, indexDir: string): Promise<Map<string, Hit[]>> {
  const input = QUERIES.map((query) => JSON.stringify({ query })).join('\n') + '\n';
  const child = run(
    PYTHON,
    // --no-resident: the CLI ranks in its own process, not through the running server's socket
    ['-m', 'mdsearch_ls', 'search', '--no-resident', '--queries', '-', '--format', 'json',
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
      }))
      .sort((a, b) => a.index - b.index)
      .map(({ label, description }) => ({ label, description }));
    return { rows, busy };
  })()`);
}

describe('the Search Notes QuickPick keeps the engine\'s order (code-server)', { timeout: 300_000 }, () => {
  let session: Session | undefined;
  let wb: Workbench;
  let expected: Map<string, Hit[]>;

  before(async () => {
    assert.ok(fs.existsSync(CODE_SERVER), `code-server not found at ${CODE_SERVER}`);
    assert.ok(fs.existsSync(VSIX), `${VSIX} missing: run npm run package first`);
    const indexDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mdsearch-e2e-order-index-'));
    session = await openSession({
      name: 'order',
      codeServer: CODE_SERVER,
      vsix: VSIX,
      fixture: VAULT,
      settings: {
        'mdsearch.server.pythonPath': PYTHON,
        'mdsearch.indexDir': indexDir,
        'mdsearch.maxResults': K,
      },
    });
    wb = session.wb;
    await waitFor('the vault indexed', async () => {
      const t = await wb.mdsearchStatus();
      if (/error/.test(t)) throw new Error(`status bar: ${t}`);
      return /^\d[\d,]* sections?$/.test(t) ? t : undefined;
    }, 240_000, 250);
    expected = await cliHits(session.vault, indexDir);
  });

  after(async () => {
    await session?.close();
  });

  it('shows, for each query typed, exactly the CLI\'s hits in the CLI\'s order', async () => {
    await wb.runCommand('Markdown Search: Search Notes');
    await wb.quickInputBox.waitFor({ state: 'visible' });
    const mismatches: string[] = [];
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
      // Typed like a user into the open pick: the live search runs on each pause.
      await wb.quickInputBox.press('Control+a');
      await wb.page.keyboard.type(query, { delay: 20 });
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
    }
    await wb.screenshot('order.png');
    assert.deepEqual(mismatches, [], `rows not in the engine's order:\n${mismatches.join('\n')}`);
  });

  it('opens the first row at its section on Enter', async () => {
    const query = 'security'; // a query whose order VS Code used to change
    const first = expected.get(query)?.[0];
    assert.ok(first);
    await wb.quickInputBox.press('Control+a');
    await wb.page.keyboard.type(query, { delay: 20 });
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
