// Settings -> what the server receives. One function builds the `mdsearch` object for both
// `initializationOptions` and `workspace/configuration`, so the two can never disagree.
// Type-only `vscode` imports keep this testable in plain Node.
import type { ConfigurationChangeEvent } from 'vscode';

/** The part of `WorkspaceConfiguration` we read; a plain object getter in tests. */
export interface ConfigReader {
  get<T>(section: string): T | undefined;
}

/** The server's `mdsearch` settings section (camelCase, nested at dots: `hover.minScore` is
 * `{hover: {minScore}}`), as the server declares them in mdsearch_ls/config.py. */
export type ServerSettings = { [key: string]: unknown; documentSymbols: false };

/** One contributed setting, as package.json declares it (generated from the server's
 * declarations by scripts/sync_settings.py, so it always matches what the server accepts). */
export interface SettingSchema {
  type: string | string[];
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
}

/** Keys of package.json's `mdsearch.*` settings that belong to the client, not the server. */
const CLIENT_ONLY = ['server.', 'trace.', 'enable'];
/** Settings holding a path, expanded like VS Code's own path settings. */
const PATH_KEYS = new Set(['indexDir', 'model']);

/** The server settings package.json contributes (keys without the `mdsearch.` prefix). */
export function serverSchema(packageJson: unknown): Record<string, SettingSchema> {
  const props = (packageJson as { contributes?: { configuration?: { properties?: Record<string, SettingSchema> } } })
    ?.contributes?.configuration?.properties ?? {};
  const out: Record<string, SettingSchema> = {};
  for (const [key, schema] of Object.entries(props)) {
    if (!key.startsWith('mdsearch.')) continue;
    const name = key.slice('mdsearch.'.length);
    if (CLIENT_ONLY.some((p) => name.startsWith(p))) continue;
    out[name] = schema;
  }
  return out;
}

export interface PathContext {
  home: string;
  /** Folder that `${workspaceFolder}` and relative paths resolve against, if any. */
  workspaceFolder?: string;
}

/** Expands `~` and `${workspaceFolder}` the way VS Code users expect in path settings. */
export function expandPath(value: string, ctx: PathContext): string {
  let out = value.trim();
  if (ctx.workspaceFolder !== undefined) out = out.split('${workspaceFolder}').join(ctx.workspaceFolder);
  if (out === '~') return ctx.home;
  if (out.startsWith('~/') || out.startsWith('~\\')) out = ctx.home + out.slice(1);
  return out;
}

/** The value if it fits the schema (type, enum, range), else undefined; "" means unset. */
function checked(value: unknown, schema: SettingSchema): unknown {
  const types = Array.isArray(schema.type) ? schema.type : [schema.type];
  if (value === undefined || value === null || value === '') return undefined;
  if (schema.enum && !schema.enum.includes(value)) return undefined;
  if (typeof value === 'string' && types.includes('string')) return value.trim() || undefined;
  if (typeof value === 'boolean' && types.includes('boolean')) return value;
  if (typeof value === 'number' && Number.isFinite(value) && (types.includes('number') || (types.includes('integer') && Number.isInteger(value)))) {
    if (schema.minimum !== undefined && value < schema.minimum) return undefined;
    if (schema.maximum !== undefined && value > schema.maximum) return undefined;
    return value;
  }
  if (Array.isArray(value) && types.includes('array')) {
    return value.filter((s): s is string => typeof s === 'string' && s.trim() !== '');
  }
  return undefined;
}

/** Builds the server settings from the `mdsearch` configuration section: every server setting
 * package.json contributes, nested at dots. Unset or invalid values are left out (never sent as
 * "" or null) so the server's own defaults apply; path settings are expanded. */
export function toServerSettings(
  cfg: ConfigReader,
  paths: PathContext,
  schema: Record<string, SettingSchema>,
): ServerSettings {
  const out: ServerSettings = { documentSymbols: false };
  for (const [key, entry] of Object.entries(schema)) {
    let value = checked(cfg.get(key), entry);
    if (value === undefined) continue;
    if (PATH_KEYS.has(key) && typeof value === 'string' && (key !== 'model' || value.startsWith('~') || value.includes('${'))) {
      value = expandPath(value, paths);
    }
    const parts = key.split('.');
    let node: Record<string, unknown> = out;
    for (const part of parts.slice(0, -1)) {
      if (typeof node[part] !== 'object' || node[part] === null) node[part] = {};
      node = node[part] as Record<string, unknown>;
    }
    node[parts[parts.length - 1] as string] = value;
  }
  return out;
}

const nonEmpty = (v: unknown): string | undefined =>
  typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;

/** `mdsearch.server.path`, expanded; undefined when unset so the other places are tried. */
export function serverPathSetting(cfg: ConfigReader, paths: PathContext): string | undefined {
  const raw = nonEmpty(cfg.get('server.path'));
  return raw === undefined ? undefined : expandPath(raw, paths);
}

/** What `WorkspaceConfiguration.inspect` says of a setting, the levels a person sets. */
export interface Inspected<T> {
  globalValue?: T;
  workspaceValue?: T;
  workspaceFolderValue?: T;
}

/** Whether mdsearch runs for a folder: `mdsearch.enable` where a person set it (folder, then
 * workspace, then user settings), else whether the folder is an Obsidian vault. So a code
 * repository with a README starts nothing, a vault starts at once, and either can be changed. */
export function isEnabled(inspected: Inspected<unknown> | undefined, isVault: boolean): boolean {
  const set = [inspected?.workspaceFolderValue, inspected?.workspaceValue, inspected?.globalValue]
    .find((v): v is boolean => typeof v === 'boolean');
  return set ?? isVault;
}

/** Settings whose change needs a new server process: only the program. The server applies
 * every one of its own settings live (it pulls them again on workspace/didChangeConfiguration:
 * search settings apply to the next request, index settings reopen the folders they concern). */
export const RESTART_SETTINGS: readonly string[] = ['mdsearch.server.path'];

export function needsRestart(e: Pick<ConfigurationChangeEvent, 'affectsConfiguration'>): boolean {
  return RESTART_SETTINGS.some((key) => e.affectsConfiguration(key));
}
