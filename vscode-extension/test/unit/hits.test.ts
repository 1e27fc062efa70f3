import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  describeSearchError,
  hitToItem,
  hitsToItems,
  isCancellation,
  isConvertedDocument,
  messageItem,
  oneLine,
  parentTrail,
  plainText,
  sectionLines,
} from '../../src/hits';
import type { Hit } from '../../src/protocol';

const hit = (over: Partial<Hit> = {}): Hit => ({
  path: 'projects/garden.md',
  uri: 'file:///vault/projects/garden.md',
  title: 'Watering schedule',
  breadcrumb: 'Garden > Summer > Watering schedule',
  start_line: 12,
  end_line: 20,
  score: 0.82,
  snippet: 'Water the tomatoes\n  early in the   morning.',
  root: '/vault',
  ...over,
});

describe('hitToItem', () => {
  it('uses the title as label, breadcrumb and path as description, snippet as detail', () => {
    const item = hitToItem(hit());
    assert.equal(item.label, '$(markdown) Watering schedule');
    assert.equal(item.description, 'Garden > Summer · projects/garden.md');
    assert.equal(item.detail, 'Water the tomatoes early in the morning.');
    assert.equal(item.hit?.start_line, 12);
  });

  it('names a PDF hit by its page and marks converted documents as files', () => {
    const pdf = hit({ path: 'papers/bread.pdf', uri: 'file:///vault/papers/bread.pdf', title: 'Page 3',
      breadcrumb: 'Method (p. 2) > Page 3', format: 'pdf', page: 3 });
    const item = hitToItem(pdf);
    assert.equal(item.label, '$(file) Page 3');
    assert.equal(item.description, 'Method (p. 2) · papers/bread.pdf, page 3');
    assert.equal(isConvertedDocument(pdf), true);
    // An Org file is converted line for line: its hits open at their line like a note's.
    assert.equal(isConvertedDocument(hit({ format: 'org' })), false);
    assert.equal(isConvertedDocument(hit()), false);
  });

  it('always shows semantic hits so the fuzzy filter cannot hide them', () => {
    assert.equal(hitToItem(hit()).alwaysShow, true);
    assert.equal(hitToItem(hit(), { alwaysShow: false }).alwaysShow, false);
  });

  it('falls back to the file name when the section has no title', () => {
    const item = hitToItem(hit({ title: '  ', breadcrumb: '' }));
    assert.equal(item.label, '$(markdown) garden.md');
    assert.equal(item.description, 'projects/garden.md');
  });

  it('keeps a breadcrumb that does not end with the title', () => {
    assert.equal(parentTrail(hit({ breadcrumb: 'Garden > Summer' })), 'Garden > Summer');
    assert.equal(parentTrail(hit({ breadcrumb: 'Watering schedule' })), '');
  });

  it('prefixes the folder name in multi-root workspaces', () => {
    const item = hitToItem(hit({ root: '/home/me/work-notes', breadcrumb: '' }), { multiRoot: true });
    assert.equal(item.description, 'work-notes/projects/garden.md');
  });

  it('omits the detail when there is no snippet', () => {
    assert.equal(hitToItem(hit({ snippet: ' \n ' })).detail, undefined);
  });

  it('maps a list in order', () => {
    const items = hitsToItems([hit({ title: 'A' }), hit({ title: 'B' })]);
    assert.deepEqual(items.map((i) => i.label), ['$(markdown) A', '$(markdown) B']);
  });
});

describe('oneLine', () => {
  it('cuts long text at a word boundary with an ellipsis', () => {
    const out = oneLine('alpha beta gamma delta epsilon zeta', 20);
    assert.ok(out.length <= 20, out);
    assert.equal(out, 'alpha beta gamma…');
  });
  it('leaves short text alone', () => {
    assert.equal(oneLine('short', 20), 'short');
  });
});

describe('messageItem', () => {
  it('is a row without a hit', () => {
    const item = messageItem('No matching sections');
    assert.equal(item.hit, undefined);
    assert.equal(item.label, '$(info) No matching sections');
    assert.equal(item.alwaysShow, true);
  });
});

describe('sectionLines', () => {
  it('returns the 0-based inclusive span', () => {
    assert.deepEqual(sectionLines(hit(), 100), { start: 12, end: 20 });
  });
  it('clamps to a document that shrank since indexing', () => {
    assert.deepEqual(sectionLines(hit(), 15), { start: 12, end: 14 });
    assert.deepEqual(sectionLines(hit({ start_line: 40, end_line: 50 }), 15), { start: 14, end: 14 });
  });
  it('never ends before it starts', () => {
    assert.deepEqual(sectionLines(hit({ start_line: 5, end_line: 2 }), 10), { start: 5, end: 5 });
  });
});

describe('describeSearchError', () => {
  it('shows an InvalidParams message (bad inline filter) as the user wrote it', () => {
    const error = Object.assign(new Error('unknown filter "tags:" (use tag:NAME)'), { code: -32602 });
    assert.deepEqual(describeSearchError(error), { message: 'unknown filter "tags:" (use tag:NAME)', userError: true });
  });
  it('labels other failures as server failures', () => {
    const error = Object.assign(new Error('boom'), { code: -32603 });
    assert.deepEqual(describeSearchError(error), { message: 'Search failed: boom', userError: false });
  });
});

describe('isCancellation', () => {
  it('recognises both forms of a cancelled request', () => {
    assert.equal(isCancellation({ code: -32800 }), true);
    const cancelled = new Error('Canceled');
    cancelled.name = 'Canceled';
    assert.equal(isCancellation(cancelled), true);
    assert.equal(isCancellation(new Error('other')), false);
  });
});

describe('plainText', () => {
  // Each: the server's snippet of a section of examples/vault or Obsidian's help vault, and the
  // words `mdsearch search --format json` shows for it.
  const cases: [string, string][] = [
    ['add it in alphabetical order. **ARR** — Annual recurring revenue.', 'add it in alphabetical order. ARR — Annual recurring revenue.'],
    ['When an incident is open (see [[Crisis management and escalation]]), support stops', 'When an incident is open (see Crisis management and escalation), support stops'],
    ['[[templates/Daily note|Daily note template]] — the template', 'Daily note template — the template'],
    ['using [[Bases syntax#Date arithmetic|date arithmetic]] or [[Views#Settings]].', 'using date arithmetic or Views > Settings.'],
    ['The internal assistant gateway (`tools/assistant-gateway`) enforces them', 'The internal assistant gateway (tools/assistant-gateway) enforces them'],
    ['roll back first: ```bash make deploy ENV=production VERSION=4.12.0 ``` A rollback', 'roll back first: make deploy ENV=production VERSION=4.12.0 A rollback'],
    ['use the `![[File.base]]` syntax', 'use the ![[File.base]] syntax'],
    ['See [the guide](https://example.com/a_b) and ![diagram](img/x.png) *now*, _please_.', 'See the guide and diagram now, please.'],
    ['Keep snake_case and 2 * 3 * 4 as they are; ~~old~~ ==new==', 'Keep snake_case and 2 * 3 * 4 as they are; old new'],
    ['[!tip] Finding things Use the search %%not this%% in <kbd>Ctrl</kbd>+K.[^1]', 'Finding things Use the search in Ctrl+K.'],
    ['| Level | Definition | |---|---| | SEV1 | Down | | SEV2 | Degraded |', 'Level | Definition · SEV1 | Down · SEV2 | Degraded'],
    ['## Restore procedures', 'Restore procedures'],
    ['Three things follow: **Cost grows with…', 'Three things follow: Cost grows with…'],
    ['Read \\*this\\* literally.', 'Read *this* literally.'],
  ];
  for (const [markdown, plain] of cases) {
    it(`reads ${JSON.stringify(markdown.slice(0, 40))} as the CLI does`, () => {
      assert.equal(plainText(markdown), plain);
    });
  }

  it('is what a search row shows under its title', () => {
    const item = hitToItem(hit({ snippet: 'Call **Tomas** first (see [[On-call rota|the rota]]).' }));
    assert.equal(item.detail, 'Call Tomas first (see the rota).');
  });
});
