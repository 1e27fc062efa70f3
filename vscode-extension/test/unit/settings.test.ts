import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type ConfigReader,
  expandPath,
  needsRestart,
  pythonPathSetting,
  RESTART_SETTINGS,
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
  'server.pythonPath': '',
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

describe('toServerSettings', () => {
  it('maps the defaults to camelCase options and leaves empty strings out', () => {
    assert.deepEqual(toServerSettings(reader(defaults), ctx), {
      include: ['**/*.md', '**/*.markdown'],
      exclude: ['**/node_modules/**'],
      chunkSize: 1000,
      chunkOverlap: 200,
      maxResults: 20,
      mode: 'hybrid',
      fusion: 'convex',
      hover: { enabled: true, maxResults: 5, minScore: 0.35 },
      documentSymbols: false,
    });
  });

  it('never sends client-only settings', () => {
    const out = toServerSettings(reader(defaults), ctx) as unknown as Record<string, unknown>;
    assert.equal('server' in out, false);
    assert.equal('trace' in out, false);
    assert.equal('pythonPath' in out, false);
  });

  it('sends indexDir and model when set, expanding ~ and ${workspaceFolder}', () => {
    const out = toServerSettings(reader({ ...defaults, indexDir: '~/.cache/notes', model: '${workspaceFolder}/model' }), ctx);
    assert.equal(out.indexDir, '/home/me/.cache/notes');
    assert.equal(out.model, '/vault/model');
    const named = toServerSettings(reader({ ...defaults, model: 'sentence-transformers/all-MiniLM-L6-v2' }), ctx);
    assert.equal(named.model, 'sentence-transformers/all-MiniLM-L6-v2');
  });

  it('drops invalid values so the server defaults apply', () => {
    const out = toServerSettings(
      reader({ include: 'notes/*.md', exclude: ['', 5, 'a/**'], chunkSize: Number.NaN, mode: 'fuzzy', fusion: 'borda', 'hover.enabled': 'yes' }),
      ctx,
    );
    assert.deepEqual(out, { exclude: ['a/**'], hover: {}, documentSymbols: false });
  });

  it('always sends documentSymbols: false, even with nothing configured', () => {
    assert.deepEqual(toServerSettings(reader({}), ctx), { hover: {}, documentSymbols: false });
  });

  it('is plain JSON (survives a round trip unchanged)', () => {
    const out = toServerSettings(reader(defaults), ctx);
    assert.deepEqual(JSON.parse(JSON.stringify(out)), out);
  });
});

describe('pythonPathSetting', () => {
  it('is undefined when unset or blank', () => {
    assert.equal(pythonPathSetting(reader({ 'server.pythonPath': '' }), ctx), undefined);
    assert.equal(pythonPathSetting(reader({ 'server.pythonPath': '   ' }), ctx), undefined);
    assert.equal(pythonPathSetting(reader({}), ctx), undefined);
  });
  it('expands the configured path', () => {
    assert.equal(pythonPathSetting(reader({ 'server.pythonPath': '${workspaceFolder}/.venv/bin/python' }), ctx), '/vault/.venv/bin/python');
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
  it('restarts for server settings', () => {
    assert.equal(needsRestart(event(['mdsearch.model'])), true);
    assert.equal(needsRestart(event(['mdsearch.hover.minScore'])), true);
    assert.equal(needsRestart(event(['mdsearch.server.pythonPath'])), true);
    assert.equal(needsRestart(event(['mdsearch.mode'])), true);
    assert.equal(needsRestart(event(['mdsearch.fusion'])), true);
  });
  it('does not restart for trace or unrelated settings', () => {
    assert.equal(needsRestart(event(['mdsearch.trace.server'])), false);
    assert.equal(needsRestart(event(['editor.fontSize'])), false);
  });
  it('covers every setting package.json contributes except trace', async () => {
    const { readFile } = await import('node:fs/promises');
    const pkg = JSON.parse(await readFile(new URL('../../../package.json', `file://${__filename}`), 'utf8')) as {
      contributes: { configuration: { properties: Record<string, unknown> } };
    };
    for (const key of Object.keys(pkg.contributes.configuration.properties)) {
      if (key === 'mdsearch.trace.server') continue;
      assert.ok(needsRestart(event([key])), `${key} should restart the server (RESTART_SETTINGS: ${RESTART_SETTINGS.join(', ')})`);
    }
  });
});
