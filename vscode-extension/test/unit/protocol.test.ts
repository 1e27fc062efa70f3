import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseHits, parseRelatedArgs, parseStatus, ServerCommands, SHOW_RELATED, toRelatedPick } from '../../src/protocol';

describe('parseHits', () => {
  it('keeps well-formed hits and drops the rest', () => {
    const hits = parseHits([
      { path: 'a.md', uri: 'file:///v/a.md', title: 'A', breadcrumb: 'A', start_line: 0, end_line: 3, score: 0.5, snippet: 's', root: '/v' },
      { path: 'b.md', uri: 'file:///v/b.md', start_line: 1, end_line: 2 },
      { path: 'c.md' },
      'nonsense',
    ]);
    assert.equal(hits.length, 2);
    assert.deepEqual(hits[1], {
      path: 'b.md', uri: 'file:///v/b.md', start_line: 1, end_line: 2, title: '', breadcrumb: '', snippet: '', score: null, root: '',
    });
  });

  it('keeps the page and format of a hit in a document', () => {
    const [pdf] = parseHits([{ path: 'p.pdf', uri: 'file:///v/p.pdf', start_line: 5, end_line: 9, format: 'pdf', page: 2 }]);
    assert.equal(pdf?.page, 2);
    assert.equal(pdf?.format, 'pdf');
  });

  it('returns nothing for a non-array reply', () => {
    assert.deepEqual(parseHits(null), []);
    assert.deepEqual(parseHits({ hits: [] }), []);
  });
});

describe('command ids', () => {
  it('never collide with the UI commands package.json contributes', async () => {
    const { readFile } = await import('node:fs/promises');
    const pkg = JSON.parse(await readFile(new URL('../../../package.json', `file://${__filename}`), 'utf8')) as {
      contributes: { commands: { command: string }[] };
    };
    const ui = new Set(pkg.contributes.commands.map((c) => c.command));
    for (const id of Object.values(ServerCommands)) assert.equal(ui.has(id), false, id);
    assert.ok(ui.has('mdsearch.searchNotes'), 'the UI commands were read');
  });
});

describe('related lenses', () => {
  it('open the QuickPick instead of the server command, with the same arguments', () => {
    const args = [{ uri: 'file:///v/a.md', line: 4, limit: 10, minScore: 0.5 }];
    const pick = toRelatedPick({ title: '3 related · 1 linked', command: 'mdsearch.related', arguments: args });
    assert.equal(pick.command, SHOW_RELATED);
    assert.equal(pick.arguments, args);
    assert.equal(pick.title, '3 related · 1 linked');
    const other = { title: 'x', command: 'editor.action.showReferences' };
    assert.equal(toRelatedPick(other), other);
  });

  it('accept the lens arguments and refuse anything else', () => {
    assert.deepEqual(parseRelatedArgs([{ uri: 'file:///v/a.md', line: 4, limit: 10, minScore: 0.5 }]),
      { uri: 'file:///v/a.md', line: 4, limit: 10, minScore: 0.5 });
    assert.deepEqual(parseRelatedArgs({ uri: 'file:///v/a.md', line: 0 }), { uri: 'file:///v/a.md', line: 0 });
    assert.equal(parseRelatedArgs(undefined), undefined);
    assert.equal(parseRelatedArgs([{ uri: 3, line: 0 }]), undefined);
  });
});

describe('parseStatus', () => {
  it('keeps the server pid', () => {
    assert.equal(parseStatus({ state: 'ready', folders: [], pid: 4242 })?.pid, 4242);
    assert.equal(parseStatus({ state: 'ready', folders: [], pid: 'x' })?.pid, undefined);
  });
});
