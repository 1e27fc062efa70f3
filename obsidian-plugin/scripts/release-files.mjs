// The files a release and the plugin lists read, kept in step from one source: package.json's
// version. It sets manifest.json's version, maps it to minAppVersion in versions.json, and copies
// both to the repository root when there are copies there (the mdsearch repository: BRAT and the
// community plugin list read them at the root). `npm version <new>` runs it.
//   node scripts/release-files.mjs
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const read = (f) => JSON.parse(fs.readFileSync(path.join(root, f), 'utf8'));
const write = (dir, f, value) => fs.writeFileSync(path.join(dir, f), `${JSON.stringify(value, null, 2)}\n`);

const { version } = read('package.json');
const manifest = { ...read('manifest.json'), version };
const versions = { ...read('versions.json'), [version]: manifest.minAppVersion };
const parent = path.dirname(root);
for (const dir of [root, ...(fs.existsSync(path.join(parent, 'manifest.json')) ? [parent] : [])]) {
  write(dir, 'manifest.json', manifest);
  write(dir, 'versions.json', versions);
  process.stdout.write(`wrote ${path.join(dir, 'manifest.json')} and versions.json (${version}, Obsidian ${manifest.minAppVersion}+)\n`);
}
