// Pure mapping from server hits to QuickPick items and editor ranges. No runtime `vscode` import:
// these functions are unit-tested in plain Node.
import type { QuickPickItem } from 'vscode';
import type { Hit } from './protocol';

/** A QuickPick row; `hit` is absent for informational rows (errors, "no results"). */
export interface HitItem extends QuickPickItem {
  hit?: Hit;
}

export interface HitItemOptions {
  /** Prefix the path with the folder name, so hits from different roots can be told apart. */
  multiRoot?: boolean;
  /** Longest snippet shown as the item's detail line. */
  maxSnippet?: number;
  /** Keep the row visible whatever is typed (default true: semantic search results). */
  alwaysShow?: boolean;
}

const BREADCRUMB_SEP = ' > ';

/** Collapses whitespace and cuts at a word boundary, so a snippet fits on the detail line. */
export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  if (flat.length <= max) return flat;
  const cut = flat.slice(0, max - 1);
  const space = cut.lastIndexOf(' ');
  return `${(space > max * 0.6 ? cut.slice(0, space) : cut).trimEnd()}…`;
}

// Markdown in the server's snippet (the section's first 200 characters, line breaks and the
// markers at line starts already gone), turned into the reading text `mdsearch search` prints:
// the markers go, the words stay. Obsidian syntax reads as in engine/search/preview.py; code is
// kept as written.
const PROSE: readonly [RegExp, string | ((...groups: string[]) => string)][] = [
  [/%%.*?%%/g, ''], // Obsidian comments
  [/!\[\[[^\]]*\]\]/g, ''], // embeds: nothing to read in one line
  [/\[\[([^\]|#^]*)(?:[#^]([^\]|]*))?(?:\|([^\]]*))?\]\]/g, (_m, target: string, sub?: string, alias?: string) =>
    alias ?? (target && sub ? `${target} > ${sub}` : target || sub || '')],
  [/!?\[([^\]]*)\]\([^)]*(?:\)|$)/g, '$1'], // [text](url) and ![alt](url), the url maybe cut
  [/\[([^\]]+)\]\[[^\]]*\]/g, '$1'], // [text][ref]
  [/<((?:https?|mailto):[^>\s]+)>/g, '$1'], // autolinks
  [/<\/?[A-Za-z][^>]*>/g, ''], // HTML tags
  [/\[\^[^\]]+\]/g, ''], // footnote references
  [/\[![\w-]+\][+-]?/g, ''], // callout markers
  [/(^|\s)\^[A-Za-z0-9-]+(?=\s|$)/g, '$1'], // block ids
  [/\|?(?:\s*:?-+:?\s*\|)+(?:\s*:?-+:?\s*)?/g, ' '], // table separator rows
  [/(\*\*|__)(?=\S)(.+?)(?<=\S)\1/g, '$2'], // strong
  [/(^|[^\w*])\*(?=\S)(.+?)(?<=\S)\*(?!\w)/g, '$1$2'], // emphasis
  [/(^|\W)_(?=\S)(.+?)(?<=\S)_(?!\w)/g, '$1$2'],
  [/(~~|==)(?=\S)(.+?)(?<=\S)\1/g, '$2'], // strikethrough, highlight
  [/\*\*|__|\[\[|\]\]/g, ''], // a marker whose pair the 200-character cut took
  [/^\s*#{1,6}\s+/, ''], // a heading-only section's heading
];
/** What is kept as written: a code span (group 2: its text), a backslash-escaped character
 * (group 3); and a code fence's marker and language, which go. */
const LITERAL = /(?:`{3,}|~{3,})[\w+#.-]*|(`+)(.+?)\1|`+|\\([!-/:-@[-`{-~])/g;

function prose(text: string): string {
  for (const [pattern, replacement] of PROSE) {
    text = typeof replacement === 'string' ? text.replace(pattern, replacement) : text.replace(pattern, replacement);
  }
  return text;
}

/** The snippet as plain text, as the CLI shows it: no `**`, code fences, link or wikilink
 * syntax (code spans keep their text as written). Table rows keep the pipes between cells, as
 * the CLI's do. */
export function plainText(markdown: string): string {
  let out = '';
  let last = 0;
  for (const m of markdown.matchAll(LITERAL)) {
    out += prose(markdown.slice(last, m.index)) + (m[2] ?? m[3] ?? '');
    last = m.index + m[0].length;
  }
  out += prose(markdown.slice(last));
  return out.replace(/\s+/g, ' ').replace(/^\s*\|\s*|\s*\|\s*$/g, '').replace(/\|\s*\|/g, '·').trim();
}

/** Last path segment of a POSIX or Windows path (folder display names). */
export function baseName(p: string): string {
  const parts = p.split(/[\\/]+/).filter((s) => s.length > 0);
  return parts[parts.length - 1] ?? p;
}

/** The headings above the section: the breadcrumb without its last element when that element is the
 * section's own title, which is already the label. */
export function parentTrail(hit: Hit): string {
  const parts = hit.breadcrumb.split(BREADCRUMB_SEP).map((s) => s.trim()).filter((s) => s.length > 0);
  if (parts.length > 0 && parts[parts.length - 1] === hit.title.trim()) parts.pop();
  return parts.join(BREADCRUMB_SEP);
}

/** Whether a hit's lines are not the file's own (a PDF, Word, HTML or notebook hit: its lines are
 * those of the converted text), so the file is opened as it is, not at a line. */
export function isConvertedDocument(hit: Hit): boolean {
  return hit.format !== undefined && hit.format !== 'org';
}

export function displayPath(hit: Hit, multiRoot: boolean): string {
  return multiRoot && hit.root ? `${baseName(hit.root)}/${hit.path}` : hit.path;
}

/** Maps one hit to a QuickPick item: title as label, breadcrumb and path as description, snippet as
 * detail. `alwaysShow` keeps VS Code's fuzzy filter from hiding semantic hits whose text does not
 * literally contain the query, which is the point of semantic search. */
export function hitToItem(hit: Hit, options: HitItemOptions = {}): HitItem {
  const shown = displayPath(hit, options.multiRoot ?? false);
  const path = hit.page !== undefined ? `${shown}, page ${hit.page}` : shown;
  const title = hit.title.trim() || baseName(hit.path);
  const trail = parentTrail(hit);
  const item: HitItem = {
    label: `$(${hit.format === undefined ? 'markdown' : 'file'}) ${title}`,
    description: trail ? `${trail} · ${path}` : path,
    alwaysShow: options.alwaysShow ?? true,
    hit,
  };
  const snippet = oneLine(plainText(hit.snippet), options.maxSnippet ?? 240);
  if (snippet) item.detail = snippet;
  return item;
}

/** A row that explains instead of navigating (bad filter, no results, server down). */
export function messageItem(message: string, icon: 'info' | 'error' | 'warning' = 'info'): HitItem {
  return { label: `$(${icon}) ${message}`, alwaysShow: true };
}

export function hitsToItems(hits: readonly Hit[], options: HitItemOptions = {}): HitItem[] {
  return hits.map((h) => hitToItem(h, options));
}

/** 0-based inclusive line span of a hit, clamped to the document as it is now (the file may have
 * shrunk since it was indexed). */
export function sectionLines(hit: Hit, lineCount: number): { start: number; end: number } {
  const last = Math.max(0, lineCount - 1);
  const start = Math.min(Math.max(0, Math.floor(hit.start_line)), last);
  const end = Math.min(Math.max(start, Math.floor(hit.end_line)), last);
  return { start, end };
}

/** LSP error code for a request with bad params (here: a malformed inline filter). */
export const INVALID_PARAMS = -32602;
/** LSP error code of a request cancelled by the client. */
export const REQUEST_CANCELLED = -32800;

/** Turns a failed search into the text shown in the QuickPick. Bad filters are the user's to fix, so
 * they read as-is; anything else is labelled as a server failure. */
export function describeSearchError(error: unknown): { message: string; userError: boolean } {
  const code = typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined;
  const raw = error instanceof Error ? error.message : typeof error === 'string' ? error : String(error);
  if (code === INVALID_PARAMS) return { message: raw, userError: true };
  return { message: `Search failed: ${raw}`, userError: false };
}

/** vscode-languageclient rejects a cancelled request with a CancellationError ("Canceled") or an
 * LSP RequestCancelled error, depending on who noticed first. */
export function isCancellation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  if ('code' in error && error.code === REQUEST_CANCELLED) return true;
  return error instanceof Error && error.name === 'Canceled';
}
