// Bundles the plugin (main.js, what Obsidian loads) or the tests (out/test/*.test.js, where
// `obsidian` resolves to the stand-in module test/stub/obsidian.ts, since the npm package holds
// types only).
//   node scripts/build.mjs [--production] [--watch] [--tests]
import { builtinModules } from 'node:module';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

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

if (args.has('--tests')) {
  const dir = path.join(root, 'test');
  const entryPoints = fs.readdirSync(dir).filter((f) => f.endsWith('.test.ts')).map((f) => path.join(dir, f));
  fs.rmSync(path.join(root, 'out', 'test'), { recursive: true, force: true });
  await esbuild.build({
    entryPoints,
    outdir: path.join(root, 'out', 'test'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    sourcemap: 'inline',
    alias: { obsidian: path.join(dir, 'stub', 'obsidian.ts') },
    external: builtins,
    logLevel: 'warning',
  });
} else {
  const options = {
    entryPoints: [path.join(root, 'src', 'main.ts')],
    outfile: path.join(root, 'main.js'),
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
    logLevel: 'warning',
  };
  if (args.has('--watch')) {
    const ctx = await esbuild.context(options);
    await ctx.watch();
  } else {
    await esbuild.build(options);
  }
}
