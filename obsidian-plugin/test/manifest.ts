// The release files checked against the community plugin list's rules (obsidianmd/obsidian-releases:
// the manifest's fields, an id without "obsidian", a semantic version that matches package.json and
// versions.json, a description of at most 250 characters ending with a period) and the bundle the
// release attaches (main.js, manifest.json, styles.css).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PLUGIN_DIR } from './helpers';

const SEMVER = /^\d+\.\d+\.\d+$/;

export function validateManifest(dir: string = PLUGIN_DIR): string[] {
  const problems: string[] = [];
  const read = (f: string): Record<string, unknown> => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as Record<string, unknown>;
  const m = read('manifest.json');
  const pkg = read('package.json');
  const versions = read('versions.json');
  for (const key of ['id', 'name', 'version', 'minAppVersion', 'description', 'author']) {
    if (typeof m[key] !== 'string' || !(m[key] as string).trim()) problems.push(`manifest.${key} missing`);
  }
  const id = String(m.id ?? '');
  if (!/^[a-z0-9-]+$/.test(id)) problems.push(`id "${id}" must be lowercase letters, digits and dashes`);
  if (/obsidian/i.test(id)) problems.push('id must not contain "obsidian"');
  if (!SEMVER.test(String(m.version))) problems.push(`version ${String(m.version)} is not x.y.z`);
  if (!SEMVER.test(String(m.minAppVersion))) problems.push(`minAppVersion ${String(m.minAppVersion)} is not x.y.z`);
  if (m.version !== pkg.version) problems.push(`manifest version ${String(m.version)} != package.json ${String(pkg.version)}`);
  if (versions[String(m.version)] !== m.minAppVersion) problems.push('versions.json must map the version to minAppVersion');
  const desc = String(m.description ?? '');
  if (desc.length > 250) problems.push('description over 250 characters');
  if (!/[.?!)]$/.test(desc)) problems.push('description must end with a period');
  if (/obsidian/i.test(desc)) problems.push('description should not say "Obsidian"');
  if (m.isDesktopOnly !== true) problems.push('isDesktopOnly must be true: the plugin spawns a process');
  for (const f of ['main.js', 'manifest.json', 'styles.css']) {
    if (!fs.existsSync(path.join(dir, f))) problems.push(`${f} missing (npm run build makes main.js)`);
  }
  return problems;
}
