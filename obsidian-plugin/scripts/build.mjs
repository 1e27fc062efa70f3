// Bundles the plugin or the tests.
//   node scripts/build.mjs              main.js here, with a source map (`npm run dev` adds --watch;
//                                       link this folder into a vault's plugins to try it)
//   node scripts/build.mjs --production the release assets in dist/: main.js (minified),
//                                       manifest.json, styles.css, and mdsearch-obsidian-<version>.zip
//                                       holding them in a folder named after the plugin id (unzip it
//                                       into <vault>/.obsidian/plugins/). The repository's
//                                       scripts/dist.sh copies dist/.
//   node scripts/build.mjs --tests      out/test/*.test.js and out/install/*.test.js, where
//                                       `obsidian` resolves to the stand-in module
//                                       test/stub/obsidian.ts (the npm package holds types only)
// The plugin must build from this folder alone (so it can live in a repository of its own): a
// bundle that reads a file outside it fails the build.
import { builtinModules } from 'node:module';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';
import { zipSync } from 'fflate';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = new Set(process.argv.slice(2));
const production = args.has('--production');
const builtins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

// What Obsidian provides at run time (the sample plugin's list), plus Node's own modules
// (desktop only: the plugin spawns the server).
const external = [
  'obsidian', 'electron',
  '@codemirror/autocomplete', '@codemirror/collab', '@codemirror/commands', '@codemirror/language',
  '@codemirror/lint', '@codemirror/search', '@codemirror/state', '@codemirror/view',
  '@lezer/common', '@lezer/highlight', '@lezer/lr',
  ...builtins,
];

/** Fails when a bundle read a file outside this folder (esbuild's inputs are relative to cwd). */
function assertSelfContained(metafile) {
  const outside = Object.keys(metafile.inputs).map((f) => path.resolve(f)).filter((f) => path.relative(root, f).startsWith('..'));
  if (outside.length) {
    throw new Error(`the plugin reads files outside ${root}, so it cannot live in a repository of its own:\n  ${outside.join('\n  ')}`);
  }
}

if (args.has('--tests')) {
  // test/*.test.ts to out/test/ (npm test), test/install/*.test.ts to out/install/ (npm run
  // test:install, which needs a folder of wheels)
  const dir = path.join(root, 'test');
  const entries = (sub, out) => fs.readdirSync(path.join(dir, sub)).filter((f) => f.endsWith('.test.ts'))
    .map((f) => ({ in: path.join(dir, sub, f), out: path.join(out, f.replace(/\.ts$/, '')) }));
  fs.rmSync(path.join(root, 'out'), { recursive: true, force: true });
  await esbuild.build({
    entryPoints: [...entries('.', 'test'), ...entries('install', 'install')],
    outdir: path.join(root, 'out'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    sourcemap: 'inline',
    alias: { obsidian: path.join(dir, 'stub', 'obsidian.ts') },
    // eslint (the API-version test runs the official rule) and fflate (the release zip's test)
    // are loaded from node_modules as they are.
    external: [...builtins, 'eslint', 'fflate'],
    logLevel: 'warning',
  });
} else {
  const outfile = production ? path.join(root, 'dist', 'main.js') : path.join(root, 'main.js');
  const options = {
    absWorkingDir: root,
    entryPoints: [path.join(root, 'src', 'main.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'es2022',
    external,
    minify: production,
    sourcemap: production ? false : 'inline',
    treeShaking: true,
    legalComments: production ? 'none' : 'inline',
    banner: { js: '/* mdsearch for Obsidian: bundled by esbuild from obsidian-plugin/src; see its README. */' },
    metafile: true,
    logLevel: 'warning',
  };
  if (args.has('--watch')) {
    const ctx = await esbuild.context(options);
    await ctx.watch();
  } else {
    if (production) fs.rmSync(path.join(root, 'dist'), { recursive: true, force: true });
    const result = await esbuild.build(options);
    assertSelfContained(result.metafile);
    if (production) release(path.join(root, 'dist'));
  }
}

/** The loose release assets beside main.js, and the zip of the three. */
function release(dist) {
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'manifest.json'), 'utf8'));
  for (const f of ['manifest.json', 'styles.css']) fs.copyFileSync(path.join(root, f), path.join(dist, f));
  // A fixed date, so the same sources give the same zip.
  const mtime = new Date('2020-01-01T00:00:00Z');
  const files = Object.fromEntries(['main.js', 'manifest.json', 'styles.css'].map((f) => [
    `${manifest.id}/${f}`, [fs.readFileSync(path.join(dist, f)), { mtime }],
  ]));
  fs.writeFileSync(path.join(dist, `mdsearch-obsidian-${manifest.version}.zip`), zipSync(files, { level: 9 }));
}
