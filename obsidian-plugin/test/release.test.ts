// What a release publishes (dist/: main.js, manifest.json, styles.css and the zip of the three)
// and the rules the plugin lists hold it to that the lint does not check: one version in
// package.json, manifest.json and versions.json, desktop only, and a minAppVersion true to the
// Obsidian APIs the sources call. The lint (`npm run lint`) checks the manifest's fields and
// holds every API to minAppVersion; the API test here also proves that check is live (it reads
// obsidian.d.ts's @since tags through the official rule, which passes silently when it finds no
// manifest or no types).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import { builtinModules } from 'node:module';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { ESLint } from 'eslint';
import { unzipSync } from 'fflate';
import { PLUGIN_DIR } from './helpers';

const read = (f: string): Record<string, unknown> => JSON.parse(fs.readFileSync(path.join(PLUGIN_DIR, f), 'utf8')) as Record<string, unknown>;
const manifest = read('manifest.json');
const DIST = path.join(PLUGIN_DIR, 'dist');

/** "1.8.7" against "1.10.0", part by part. */
function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d) return d;
  }
  return 0;
}

describe('release files', () => {
  test('one version in package.json, manifest.json and versions.json; desktop only', () => {
    assert.match(String(manifest.version), /^\d+\.\d+\.\d+$/);
    assert.equal(manifest.version, read('package.json').version);
    assert.equal(read('versions.json')[String(manifest.version)], manifest.minAppVersion);
    assert.equal(manifest.isDesktopOnly, true, 'the plugin spawns a process, which Obsidian mobile cannot');
  });

  test('minAppVersion is the newest @since of the Obsidian APIs the sources use', async () => {
    // The official rule, told that the app is as old as can be, reports every API with a @since.
    const eslint = new ESLint({
      cwd: PLUGIN_DIR,
      overrideConfig: { rules: { 'obsidianmd/no-unsupported-api': ['error', { minAppVersion: '0.0.1' }] } },
      ruleFilter: ({ ruleId }) => ruleId === 'obsidianmd/no-unsupported-api',
    });
    const results = await eslint.lintFiles(['src']);
    const since = new Map<string, string>();
    for (const m of results.flatMap((r) => r.messages)) {
      const found = /^'(.+)' requires Obsidian v(\S+), but/.exec(m.message);
      assert.ok(found, `not an API report: ${m.message}`);
      since.set(found[1] as string, found[2] as string);
    }
    assert.equal(since.get('App.loadLocalStorage'), '1.8.7', [...since].join(', '));
    assert.equal(since.get('Workspace.revealLeaf'), '1.7.2');
    const newest = [...since.values()].sort(compareVersions).at(-1);
    assert.equal(manifest.minAppVersion, newest, `APIs used: ${[...since].map(([k, v]) => `${k} ${v}`).join(', ')}`);
  });

  test('dist/ holds the three assets and a zip of them in a folder named after the id', () => {
    for (const f of ['main.js', 'manifest.json', 'styles.css']) assert.ok(fs.statSync(path.join(DIST, f)).size > 0, f);
    assert.deepEqual(fs.readFileSync(path.join(DIST, 'manifest.json')), fs.readFileSync(path.join(PLUGIN_DIR, 'manifest.json')));
    const zip = unzipSync(fs.readFileSync(path.join(DIST, `mdsearch-obsidian-${String(manifest.version)}.zip`)));
    assert.deepEqual(Object.keys(zip).sort(), ['main.js', 'manifest.json', 'styles.css'].map((f) => `${String(manifest.id)}/${f}`));
    for (const f of ['main.js', 'manifest.json', 'styles.css']) {
      assert.ok(Buffer.from(zip[`${String(manifest.id)}/${f}`] as Uint8Array).equals(fs.readFileSync(path.join(DIST, f))), f);
    }
  });

  test("main.js needs only what Obsidian provides: its own modules, CodeMirror's, Node's", () => {
    const bundle = fs.readFileSync(path.join(DIST, 'main.js'), 'utf8');
    const required = [...bundle.matchAll(/require\("([^"]+)"\)/g)].map((m) => m[1] as string);
    assert.ok(required.includes('obsidian'));
    const provided = (r: string): boolean => r === 'obsidian' || r.startsWith('@codemirror/') || builtinModules.includes(r.replace(/^node:/, ''));
    assert.deepEqual(required.filter((r) => !provided(r)), []);
  });
});
