// The plugin's settings: what is synced with the vault (data.json: the index settings, which a
// user wants the same on every device) and what is not (the executable's path, which differs per
// device and lives in local storage). No `obsidian` import: tested in plain Node.

export const BACKENDS = ['onnx', 'onnx-int8', 'torch'] as const;
export type Backend = (typeof BACKENDS)[number];

export interface PluginSettings {
  /** How the model runs (the server's `embedder.backend`). */
  backend: Backend;
  /** Gitignore-style globs of notes to index; empty: every note. */
  include: string[];
  /** Globs to leave out on top of the server's defaults (.obsidian/, .trash/, dot-folders). */
  exclude: string[];
  /** Most results one search shows. */
  maxResults: number;
  /** Offer mdsearch's `[[` suggestions (ranked by meaning) ahead of Obsidian's own. */
  linkSuggest: boolean;
}

export const DEFAULT_SETTINGS: PluginSettings = {
  backend: 'onnx',
  include: [],
  exclude: [],
  maxResults: 20,
  linkSuggest: true,
};

export const MAX_RESULTS_RANGE = { min: 1, max: 200 } as const;

const globs = (v: unknown): string[] | undefined =>
  Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string').map((s) => s.trim()).filter(Boolean) : undefined;

/** Settings from data.json (anything: an older version, a hand edit, nothing at all); each value
 * that does not fit falls back to its default rather than breaking the plugin. */
export function normalizeSettings(raw: unknown): PluginSettings {
  const r = typeof raw === 'object' && raw !== null ? (raw as Record<string, unknown>) : {};
  const backend = BACKENDS.find((b) => b === r.backend) ?? DEFAULT_SETTINGS.backend;
  const max = typeof r.maxResults === 'number' && Number.isInteger(r.maxResults)
    && r.maxResults >= MAX_RESULTS_RANGE.min && r.maxResults <= MAX_RESULTS_RANGE.max
    ? r.maxResults : DEFAULT_SETTINGS.maxResults;
  return {
    backend,
    include: globs(r.include) ?? [],
    exclude: globs(r.exclude) ?? [],
    maxResults: max,
    linkSuggest: typeof r.linkSuggest === 'boolean' ? r.linkSuggest : DEFAULT_SETTINGS.linkSuggest,
  };
}

/** One glob a line (the settings tab's text areas) to a list. */
export function parseGlobLines(text: string): string[] {
  return text.split(/\r?\n/).map((s) => s.trim()).filter((s) => s !== '' && !s.startsWith('#'));
}

/** The server's `mdsearch` settings section (initializationOptions and workspace/configuration).
 * Wikilinks, because that is how Obsidian links; no code lenses, inlay hints or outline, which
 * Obsidian has no surface for (the related view replaces the lenses). */
export function toServerSettings(s: PluginSettings): Record<string, unknown> {
  const out: Record<string, unknown> = {
    documentSymbols: false,
    embedder: { backend: s.backend },
    maxResults: s.maxResults,
    links: { style: 'wikilink' },
    related: { display: 'off' },
  };
  if (s.include.length) out.include = s.include;
  if (s.exclude.length) out.exclude = s.exclude;
  return out;
}

/** Key of the per-device executable path in local storage (Obsidian's `loadLocalStorage` is
 * per vault and per device, and never synced). */
export const EXECUTABLE_KEY = 'mdsearch-executable';
