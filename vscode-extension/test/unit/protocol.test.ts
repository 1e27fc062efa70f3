import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseHits, ServerCommands } from '../../src/protocol';

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
    assert.equal(ui.size, 6);
  });
});
