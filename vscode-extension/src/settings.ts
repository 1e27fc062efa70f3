// Settings -> what the server receives. One function builds the `mdsearch` object for both
// `initializationOptions` and `workspace/configuration`, so the two can never disagree.
// Type-only `vscode` imports keep this testable in plain Node.
import type { ConfigurationChangeEvent } from 'vscode';

/** The part of `WorkspaceConfiguration` we read; a plain object getter in tests. */
export interface ConfigReader {
  get<T>(section: string): T | undefined;
}

export type SearchMode = 'hybrid' | 'semantic' | 'keyword';
export const SEARCH_MODES: readonly SearchMode[] = ['hybrid', 'semantic', 'keyword'];
export type Fusion = 'convex' | 'rrf';
export const FUSIONS: readonly Fusion[] = ['convex', 'rrf'];

/** The server's `mdsearch` settings section (camelCase, as the server contract names them). */
export interface ServerSettings {
  include?: string[];
  exclude?: string[];
  indexDir?: string;
  model?: string;
  chunkSize?: number;
  chunkOverlap?: number;
  maxResults?: number;
  mode?: SearchMode;
  fusion?: Fusion;
  hover: { enabled?: boolean; maxResults?: number; minScore?: number };
  /** Always false: VS Code's built-in markdown support already provides the outline. */
  documentSymbols: false;
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

const stringList = (v: unknown): string[] | undefined =>
  Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string' && s.trim() !== '') : undefined;
const nonEmpty = (v: unknown): string | undefined =>
  typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined;
const finite = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isFinite(v) ? v : undefined;
const bool = (v: unknown): boolean | undefined => (typeof v === 'boolean' ? v : undefined);

/** Builds the server settings from the `mdsearch` configuration section. Unset or invalid values
 * are left out (never sent as "" or null) so the server's own defaults apply. */
export function toServerSettings(cfg: ConfigReader, paths: PathContext): ServerSettings {
  const out: ServerSettings = { hover: {}, documentSymbols: false };
  const include = stringList(cfg.get('include'));
  if (include) out.include = include;
  const exclude = stringList(cfg.get('exclude'));
  if (exclude) out.exclude = exclude;
  const indexDir = nonEmpty(cfg.get('indexDir'));
  if (indexDir) out.indexDir = expandPath(indexDir, paths);
  const model = nonEmpty(cfg.get('model'));
  if (model) out.model = model.startsWith('~') || model.includes('${') ? expandPath(model, paths) : model;
  const chunkSize = finite(cfg.get('chunkSize'));
  if (chunkSize !== undefined) out.chunkSize = chunkSize;
  const chunkOverlap = finite(cfg.get('chunkOverlap'));
  if (chunkOverlap !== undefined) out.chunkOverlap = chunkOverlap;
  const maxResults = finite(cfg.get('maxResults'));
  if (maxResults !== undefined) out.maxResults = maxResults;
  const mode = cfg.get<unknown>('mode');
  if (typeof mode === 'string' && (SEARCH_MODES as readonly string[]).includes(mode)) {
    out.mode = mode as SearchMode;
  }
  const fusion = cfg.get<unknown>('fusion');
  if (typeof fusion === 'string' && (FUSIONS as readonly string[]).includes(fusion)) {
    out.fusion = fusion as Fusion;
  }
  const enabled = bool(cfg.get('hover.enabled'));
  if (enabled !== undefined) out.hover.enabled = enabled;
  const hoverMax = finite(cfg.get('hover.maxResults'));
  if (hoverMax !== undefined) out.hover.maxResults = hoverMax;
  const minScore = finite(cfg.get('hover.minScore'));
  if (minScore !== undefined) out.hover.minScore = minScore;
  return out;
}

/** The interpreter setting, expanded; undefined when unset so the next source is tried. */
export function pythonPathSetting(cfg: ConfigReader, paths: PathContext): string | undefined {
  const raw = nonEmpty(cfg.get('server.pythonPath'));
  return raw === undefined ? undefined : expandPath(raw, paths);
}

/** Settings whose change needs a new server process: everything the server reads at start, plus
 * the interpreter. `mdsearch.trace.server` is absent because vscode-languageclient applies it live. */
export const RESTART_SETTINGS: readonly string[] = [
  'mdsearch.server.pythonPath',
  'mdsearch.include',
  'mdsearch.exclude',
  'mdsearch.indexDir',
  'mdsearch.model',
  'mdsearch.chunkSize',
  'mdsearch.chunkOverlap',
  'mdsearch.maxResults',
  'mdsearch.mode',
  'mdsearch.fusion',
  'mdsearch.hover',
];

export function needsRestart(e: Pick<ConfigurationChangeEvent, 'affectsConfiguration'>): boolean {
  return RESTART_SETTINGS.some((key) => e.affectsConfiguration(key));
}
