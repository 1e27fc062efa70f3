import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type ConfigReader,
  expandPath,
  needsRestart,
  isEnabled,
  serverPathSetting,
  serverSchema,
  toServerSettings,
} from '../../src/settings';

/** A ConfigReader over a flat map, like `getConfiguration('mdsearch')` with dotted keys. */
const reader = (values: Record<string, unknown>): ConfigReader => ({
  get<T>(key: string): T | undefined {
    return values[key] as T | undefined;
  },
});

const ctx = { home: '/home/me', workspaceFolder: '/vault' };

/** The defaults package.json contributes. */
const defaults = {
  'server.path': '',
  enable: false,
  include: ['**/*.md', '**/*.markdown'],
  exclude: ['**/node_modules/**'],
  indexDir: '',
  model: '',
  chunkSize: 1000,
  chunkOverlap: 200,
  maxResults: 20,
  mode: 'hybrid',
  fusion: 'convex',
  'hover.enabled': true,
  'hover.maxResults': 5,
  'hover.minScore': 0.35,
  'trace.server': 'off',
};

const PACKAGE = JSON.parse(readFileSync(join(__dirname, '../../../package.json'), 'utf8')) as unknown;
const schema = serverSchema(PACKAGE);

describe('serverSchema', () => {
  it('holds every server setting package.json contributes and no client-only one', () => {
    for (const key of ['include', 'exclude', 'indexDir', 'model', 'chunkSize', 'maxResults', 'mode',
      'fusion', 'perFile', 'hover.enabled', 'hover.minScore', 'maxFileBytes', 'embedder.backend']) {
      assert.ok(key in schema, key);
    }
    assert.equal('server.path' in schema, false);
    assert.equal('enable' in schema, false);
    assert.equal('trace.server' in schema, false);
  });
});

describe('toServerSettings', () => {
  it('nests dotted keys and leaves empty strings out', () => {
    const out = toServerSettings(reader(defaults), ctx, schema);
    assert.deepEqual(out.hover, { enabled: true, maxResults: 5, minScore: 0.35 });
    assert.equal(out.chunkSize, 1000);
    assert.equal(out.mode, 'hybrid');
    assert.deepEqual(out.include, ['**/*.md', '**/*.markdown']);
    assert.equal('indexDir' in out, false);
    assert.equal('model' in out, false);
    assert.equal(out.documentSymbols, false);
  });

  it('sends every server setting, including ones the extension has no code for', () => {
    const out = toServerSettings(reader({ perFile: 3, maxFileBytes: 5000, 'embedder.backend': 'onnx-int8' }), ctx, schema);
    assert.equal(out.perFile, 3);
    assert.equal(out.maxFileBytes, 5000);
    assert.deepEqual(out.embedder, { backend: 'onnx-int8' });
  });

  it('never sends client-only settings', () => {
    const out = toServerSettings(reader(defaults), ctx, schema) as Record<string, unknown>;
    assert.equal('server' in out, false);
    assert.equal('trace' in out, false);
    assert.equal('enable' in out, false);
  });

  it('sends indexDir and model when set, expanding ~ and ${workspaceFolder}', () => {
    const out = toServerSettings(reader({ ...defaults, indexDir: '~/.cache/notes', model: '${workspaceFolder}/model' }), ctx, schema);
    assert.equal(out.indexDir, '/home/me/.cache/notes');
    assert.equal(out.model, '/vault/model');
    const named = toServerSettings(reader({ ...defaults, model: 'sentence-transformers/all-MiniLM-L6-v2' }), ctx, schema);
    assert.equal(named.model, 'sentence-transformers/all-MiniLM-L6-v2');
  });

  it('drops invalid values so the server defaults apply', () => {
    const out = toServerSettings(
      reader({ include: 'notes/*.md', exclude: ['', 5, 'a/**'], chunkSize: Number.NaN, mode: 'fuzzy', fusion: 'borda',
        'hover.enabled': 'yes', maxResults: 0, perFile: 2.5 }),
      ctx, schema,
    );
    assert.deepEqual(out, { exclude: ['a/**'], documentSymbols: false });
  });

  it('always sends documentSymbols: false, even with nothing configured', () => {
    assert.deepEqual(toServerSettings(reader({}), ctx, schema), { documentSymbols: false });
  });

  it('is plain JSON (survives a round trip unchanged)', () => {
    const out = toServerSettings(reader(defaults), ctx, schema);
    assert.deepEqual(JSON.parse(JSON.stringify(out)), out);
  });
});

describe('serverPathSetting', () => {
  it('is undefined when unset or blank', () => {
    assert.equal(serverPathSetting(reader({ 'server.path': '' }), ctx), undefined);
    assert.equal(serverPathSetting(reader({ 'server.path': '   ' }), ctx), undefined);
    assert.equal(serverPathSetting(reader({}), ctx), undefined);
  });
  it('expands the configured path', () => {
    assert.equal(serverPathSetting(reader({ 'server.path': '${workspaceFolder}/.venv/bin/mdsearch' }), ctx), '/vault/.venv/bin/mdsearch');
    assert.equal(serverPathSetting(reader({ 'server.path': '~/.local/bin/mdsearch' }), ctx), '/home/me/.local/bin/mdsearch');
  });
});

describe('isEnabled', () => {
  it('runs in an Obsidian vault and nowhere else unless a person said so', () => {
    assert.equal(isEnabled(undefined, true), true);
    assert.equal(isEnabled({}, false), false);
    assert.equal(isEnabled({ globalValue: undefined }, false), false);
  });
  it('takes the most specific level a person set: folder, workspace, user', () => {
    assert.equal(isEnabled({ workspaceFolderValue: true }, false), true);
    assert.equal(isEnabled({ workspaceFolderValue: false, globalValue: true }, true), false);
    assert.equal(isEnabled({ workspaceValue: true, globalValue: false }, false), true);
    assert.equal(isEnabled({ globalValue: false }, true), false);
    assert.equal(isEnabled({ globalValue: true }, false), true);
  });
});

describe('expandPath', () => {
  it('expands a bare ~ and leaves other paths alone', () => {
    assert.equal(expandPath('~', ctx), '/home/me');
    assert.equal(expandPath('/abs/~x', ctx), '/abs/~x');
  });
});

describe('needsRestart', () => {
  const event = (changed: string[]) => ({
    affectsConfiguration: (section: string) => changed.some((c) => c === section || c.startsWith(`${section}.`)),
  });
  it('restarts only for the path of the program: the server applies its own settings live', () => {
    assert.equal(needsRestart(event(['mdsearch.server.path'])), true);
    for (const key of Object.keys(schema)) {
      assert.equal(needsRestart(event([`mdsearch.${key}`])), false, key);
    }
    assert.equal(needsRestart(event(['mdsearch.trace.server'])), false);
    assert.equal(needsRestart(event(['mdsearch.enable'])), false);
    assert.equal(needsRestart(event(['editor.fontSize'])), false);
  });
});
