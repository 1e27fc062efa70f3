// The editor half's text rules on plain strings: the `[[` trigger, the section under the cursor
// (headings inside code fences do not count), and the server's edits as editor changes.
import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { headingText, linkReplacement, linkTrigger, sectionEnd, sectionStart, toChanges } from '../src/client/editing';

describe('[[ trigger', () => {
  test('an open link triggers with what was typed after [[', () => {
    assert.deepEqual(linkTrigger('see [[Rel', 9), { startCh: 4, query: 'Rel' });
    assert.deepEqual(linkTrigger('see [[', 6), { startCh: 4, query: '' });
    assert.deepEqual(linkTrigger('![[emb', 6), { startCh: 1, query: 'emb' });
  });
  test('a closed link, an alias being typed, or no [[ does not', () => {
    assert.equal(linkTrigger('see [[Release]] and', 19), undefined);
    assert.equal(linkTrigger('see [[Release|the rel', 21), undefined);
    assert.equal(linkTrigger('plain text', 10), undefined);
    assert.equal(linkTrigger('a [single', 9), undefined);
  });
  test('only the text before the cursor counts', () => {
    assert.deepEqual(linkTrigger('see [[Rel]]', 9), { startCh: 4, query: 'Rel' });
  });
});

describe('section under the cursor', () => {
  const text = ['---', 'title: x', '---', 'intro', '# One', 'a', '```', '# not a heading', '```', 'b', '## Two', 'c'].join('\n');
  test('the heading above, ignoring fenced code', () => {
    assert.equal(sectionStart(text, 0), 0);
    assert.equal(sectionStart(text, 3), 0);
    assert.equal(sectionStart(text, 4), 4);
    assert.equal(sectionStart(text, 8), 4);
    assert.equal(sectionStart(text, 9), 4);
    assert.equal(sectionStart(text, 11), 10);
    assert.equal(sectionStart(text, 999), 10);
  });
  test('the section ends before the next heading', () => {
    assert.equal(sectionEnd(text, 4), 9);
    assert.equal(sectionEnd(text, 10), 11);
    assert.equal(sectionEnd(text, 0), 3);
  });
  test('heading words, or nothing for a line that is not a heading', () => {
    assert.equal(headingText(text, 4), 'One');
    assert.equal(headingText(text, 10), 'Two');
    assert.equal(headingText('## Closed ##', 0), 'Closed');
    assert.equal(headingText(text, 0), '');
  });
});

describe('edits', () => {
  const range = (l1: number, c1: number, l2: number, c2: number) => ({ start: { line: l1, character: c1 }, end: { line: l2, character: c2 } });
  test('several edits become changes applied last first', () => {
    const changes = toChanges([
      { range: range(1, 0, 1, 3), newText: 'A' },
      { range: range(3, 2, 3, 4), newText: 'B' },
      { range: range(1, 5, 1, 6), newText: 'C' },
    ]);
    assert.deepEqual(changes.map((c) => c.text), ['B', 'C', 'A']);
    assert.deepEqual(changes[0], { from: { line: 3, ch: 2 }, to: { line: 3, ch: 4 }, text: 'B' });
  });
  test('a chosen link replaces what was typed since the request, and a paired ]]', () => {
    const edit = { range: range(0, 4, 0, 9), newText: '[[Release process]]' };
    assert.deepEqual(linkReplacement(edit, { line: 0, ch: 9 }, 'see [[Rel').to, { line: 0, ch: 9 });
    assert.deepEqual(linkReplacement(edit, { line: 0, ch: 11 }, 'see [[Relea').to, { line: 0, ch: 11 });
    assert.deepEqual(linkReplacement(edit, { line: 0, ch: 11 }, 'see [[Relea]] x').to, { line: 0, ch: 13 });
  });
});
