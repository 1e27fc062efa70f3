// The wire contract with `mdsearch serve`: the command ids the server registers, the hit and
// status shapes it sends (narrowed here, since a server reply is untrusted input), and the LSP
// shapes the plugin reads besides those (completion items, code actions, diagnostics). The
// status words are generated from the server's own (status.generated.ts, by the mdsearch
// repository's scripts/sync_protocol.py), so this folder needs nothing outside it.
import {
  type FolderState,
  folderStates,
  type FolderStatusFields,
  type IndexPhase,
  indexPhases,
  type IndexProgress,
  type ModelState,
  modelStates,
} from './status.generated';

/** `workspace/executeCommand` ids registered by the server. */
export const ServerCommands = {
  search: 'mdsearch.search',
  related: 'mdsearch.related',
  reindex: 'mdsearch.reindex',
  status: 'mdsearch.status',
} as const;

/** Custom notification the server sends whenever its state changes or progress advances. */
export const StatusNotification = 'mdsearch/status';

/** One search or related-sections result. Lines are 0-based and inclusive. */
export interface Hit {
  /** Path relative to the vault, POSIX separators. */
  path: string;
  /** file:// URI of the note. */
  uri: string;
  title: string;
  /** Heading trail, " > " separated. */
  breadcrumb: string;
  start_line: number;
  end_line: number;
  /** Cosine similarity to the query; null for a keyword-only hit (keyword mode embeds nothing). */
  score: number | null;
  snippet: string;
  /** Folder the hit belongs to. */
  root: string;
  /** Set for a hit in a document read through a converter (include_formats): "pdf", "docx",
   * "html", "ipynb" or "org". Its lines are lines of the converted text, except for "org". */
  format?: string;
  /** 1-based page of a hit in a PDF. */
  page?: number;
}

/** One folder in `mdsearch/status`: the generated record, plus the folder's URI. */
export interface FolderStatus extends FolderStatusFields {
  uri?: string;
}

/** Params of `mdsearch/status`. */
export interface StatusParams {
  state: FolderState;
  /** The shared embedding model's state, when the server says it. */
  model_state?: ModelState;
  percentage?: number;
  message?: string;
  /** The server's process id: the same one across a settings change (settings apply live). */
  pid?: number;
  folders: FolderStatus[];
}

export interface SearchArgs {
  query: string;
  limit?: number;
  root?: string;
  mode?: string;
}

export interface RelatedArgs {
  uri: string;
  line: number;
  limit?: number;
  /** Leave out sections less similar than this. */
  minScore?: number;
}

export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

export interface TextEdit {
  range: Range;
  newText: string;
}

/** One `[[` completion item, as the plugin shows it. */
export interface LinkItem {
  label: string;
  /** Heading path and why it is offered ("close in meaning"), may be empty. */
  detail: string;
  /** The edit that replaces the link being typed (from `[[` to the cursor and a closing `]]`). */
  edit: TextEdit;
}

/** A code action with edits for one document only (the note in the editor). */
export interface LinkAction {
  title: string;
  kind: string;
  edits: TextEdit[];
}

/** An `unlinked-mention` hint from textDocument/publishDiagnostics. */
export interface Mention {
  range: Range;
  message: string;
  /** Path of the note it names, relative to the vault. */
  path: string;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/** Narrows an untrusted server reply to Hit[]; malformed entries are dropped rather than breaking
 * the list, because a half-written server should degrade to fewer results, not to an error. */
export function parseHits(value: unknown): Hit[] {
  if (!Array.isArray(value)) return [];
  return value.filter(
    (h): h is Hit =>
      isRecord(h) &&
      typeof h.uri === 'string' &&
      typeof h.path === 'string' &&
      typeof h.start_line === 'number' &&
      typeof h.end_line === 'number',
  ).map((h) => ({
    ...h,
    title: typeof h.title === 'string' ? h.title : '',
    breadcrumb: typeof h.breadcrumb === 'string' ? h.breadcrumb : '',
    snippet: typeof h.snippet === 'string' ? h.snippet : '',
    score: typeof h.score === 'number' ? h.score : null,
    root: typeof h.root === 'string' ? h.root : '',
    ...(typeof h.format === 'string' ? { format: h.format } : {}),
    ...(typeof h.page === 'number' ? { page: h.page } : {}),
  }));
}

/** Narrows `mdsearch/status` params (or an `mdsearch.status` reply) from the wire. */
export function parseStatus(value: unknown): StatusParams | undefined {
  if (!isRecord(value) || typeof value.state !== 'string') return undefined;
  const state = oneOf(value.state, folderStates, 'starting');
  const folders = Array.isArray(value.folders) ? value.folders.filter(isRecord).map(parseFolder) : [];
  const out: StatusParams = { state, folders };
  if (typeof value.percentage === 'number' && Number.isFinite(value.percentage)) out.percentage = value.percentage;
  if (typeof value.message === 'string') out.message = value.message;
  if (typeof value.pid === 'number' && Number.isInteger(value.pid)) out.pid = value.pid;
  if (typeof value.model_state === 'string') out.model_state = oneOf(value.model_state, modelStates, 'not-loaded');
  return out;
}

/** A word from the server's vocabulary, or `fallback` for one this client does not know (a newer
 * server): never 'ready', which would claim searches are complete when nothing says so. */
function oneOf<T extends string>(value: unknown, known: readonly T[], fallback: T): T {
  return typeof value === 'string' && (known as readonly string[]).includes(value) ? (value as T) : fallback;
}

const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);

function parseProgress(value: unknown): IndexProgress {
  const p = isRecord(value) ? value : {};
  return { state: oneOf<IndexPhase>(p.state, indexPhases, 'empty'), files_done: num(p.files_done), files_total: num(p.files_total) };
}

function parseHolder(v: unknown): { pid: number; role: string } | null {
  if (!isRecord(v) || typeof v.pid !== 'number' || typeof v.role !== 'string') return null;
  return { pid: v.pid, role: v.role };
}

function parseFolder(f: Record<string, unknown>): FolderStatus {
  const str = (v: unknown): string => (typeof v === 'string' ? v : '');
  const optStr = (v: unknown): string | null => (typeof v === 'string' ? v : null);
  const root = str(f.root);
  const out: FolderStatus = {
    root,
    name: str(f.name) || root.split(/[\\/]/).filter(Boolean).pop() || root,
    files: num(f.files),
    chunks: num(f.chunks),
    model: str(f.model),
    index_dir: optStr(f.index_dir),
    vectors: optStr(f.vectors),
    queue: num(f.queue),
    state: oneOf(f.state, folderStates, 'starting'),
    last_error: optStr(f.last_error),
    last_update: optStr(f.last_update),
    read_only: f.read_only === true,
    held_by: parseHolder(f.held_by),
    index: parseProgress(f.index),
  };
  if (typeof f.uri === 'string') out.uri = f.uri;
  return out;
}

function parsePosition(v: unknown): Position | undefined {
  if (!isRecord(v) || typeof v.line !== 'number' || typeof v.character !== 'number') return undefined;
  return { line: v.line, character: v.character };
}

export function parseRange(v: unknown): Range | undefined {
  if (!isRecord(v)) return undefined;
  const start = parsePosition(v.start);
  const end = parsePosition(v.end);
  return start && end ? { start, end } : undefined;
}

function parseEdit(v: unknown): TextEdit | undefined {
  if (!isRecord(v) || typeof v.newText !== 'string') return undefined;
  const range = parseRange(v.range);
  return range ? { range, newText: v.newText } : undefined;
}

/** textDocument/completion's answer (a list, an array or null) as link items; items without a
 * text edit are dropped (the server always sends one; without it the plugin cannot know what to
 * replace). */
export function parseCompletion(value: unknown): LinkItem[] {
  const items: unknown = isRecord(value) && !Array.isArray(value) ? value.items : value;
  if (!Array.isArray(items)) return [];
  const out: LinkItem[] = [];
  for (const item of items) {
    if (!isRecord(item) || typeof item.label !== 'string') continue;
    const edit = parseEdit(item.textEdit);
    if (!edit) continue;
    out.push({ label: item.label, detail: typeof item.detail === 'string' ? item.detail : '', edit });
  }
  return out;
}

/** textDocument/codeAction's answer: the actions whose edit touches `uri` only. */
export function parseCodeActions(value: unknown, uri: string): LinkAction[] {
  if (!Array.isArray(value)) return [];
  const out: LinkAction[] = [];
  for (const a of value) {
    if (!isRecord(a) || typeof a.title !== 'string' || !isRecord(a.edit)) continue;
    const changes = a.edit.changes;
    if (!isRecord(changes)) continue;
    const keys = Object.keys(changes);
    if (keys.length !== 1 || !sameUri(keys[0] as string, uri)) continue;
    const raw = changes[keys[0] as string];
    const edits = Array.isArray(raw) ? raw.map(parseEdit).filter((e): e is TextEdit => e !== undefined) : [];
    if (edits.length === 0) continue;
    out.push({ title: a.title, kind: typeof a.kind === 'string' ? a.kind : '', edits });
  }
  return out;
}

/** The unlinked-mention hints of a publishDiagnostics notification. */
export function parseMentions(diagnostics: unknown): Mention[] {
  if (!Array.isArray(diagnostics)) return [];
  const out: Mention[] = [];
  for (const d of diagnostics) {
    if (!isRecord(d) || d.code !== 'unlinked-mention' || typeof d.message !== 'string') continue;
    const range = parseRange(d.range);
    const path = isRecord(d.data) && typeof d.data.path === 'string' ? d.data.path : '';
    if (range) out.push({ range, message: d.message, path });
  }
  return out;
}

/** Two file URIs for one file, however each encoded its characters. */
export function sameUri(a: string, b: string): boolean {
  if (a === b) return true;
  try {
    return decodeURIComponent(a) === decodeURIComponent(b);
  } catch {
    return false;
  }
}
