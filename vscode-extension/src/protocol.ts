// The wire contract with `mdsearch serve`: command ids the server registers and the
// shapes it sends back. Kept free of any runtime import but the generated status words (no
// `vscode`), so unit tests can load it outside VS Code.
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

export type { FolderState, IndexPhase, IndexProgress, ModelState } from './status.generated';

/** `workspace/executeCommand` ids registered by the server. The UI commands use other ids
 * (mdsearch.searchNotes, ...) because vscode-languageclient turns every server command id into a
 * VS Code command of the same name, and two registrations of one id would fail. */
export const ServerCommands = {
  search: 'mdsearch.search',
  related: 'mdsearch.related',
  reindex: 'mdsearch.reindex',
  status: 'mdsearch.status',
} as const;

/** Custom notification the server sends whenever its state changes or progress advances. */
export const StatusNotification = 'mdsearch/status';

/** A folder's (or the whole server's) state: the server's own words, generated from
 * mdsearch_ls/engine/states.py by scripts/sync_protocol.py. */
export type IndexState = FolderState;

/** One search or related-sections result. Lines are 0-based and inclusive. */
export interface Hit {
  /** Path relative to its workspace folder, POSIX separators. */
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
  /** Workspace folder path the hit belongs to. */
  root: string;
  /** Set for a hit in a document read through a converter (include_formats): "pdf", "docx",
   * "html", "ipynb" or "org". Its lines are lines of the converted text, except for "org". */
  format?: string;
  /** 1-based page of a hit in a PDF. */
  page?: number;
}

/** One folder in `mdsearch/status`: the generated record, plus the folder's URI, which the
 * language server adds (the MCP server has none). */
export interface FolderStatus extends FolderStatusFields {
  uri?: string;
}

/** Params of `mdsearch/status`. */
export interface StatusParams {
  state: IndexState;
  /** The shared embedding model's state, when the server says it. */
  model_state?: ModelState;
  percentage?: number;
  message?: string;
  /** The server's process id: the same one across a settings change (settings apply live). */
  pid?: number;
  folders: FolderStatus[];
}

/** Result of the `mdsearch.status` command. */
export interface StatusResult {
  state: string;
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
  /** Leave out sections less similar than this (the lens's threshold, so its list has as many
   * rows as its count said). */
  minScore?: number;
}

/** The UI command the "3 related · 1 linked" lenses and inlay hints open instead of the server's
 * `mdsearch.related` (which only returns the list). */
export const SHOW_RELATED = 'mdsearch.showRelated';

/** Narrows the arguments a lens's command carries ({uri, line, limit?, minScore?}). */
export function parseRelatedArgs(value: unknown): RelatedArgs | undefined {
  const arg: unknown = Array.isArray(value) ? value[0] : value;
  if (!isRecord(arg) || typeof arg.uri !== 'string' || typeof arg.line !== 'number') return undefined;
  const out: RelatedArgs = { uri: arg.uri, line: arg.line };
  if (typeof arg.limit === 'number') out.limit = arg.limit;
  if (typeof arg.minScore === 'number') out.minScore = arg.minScore;
  return out;
}

/** A command from the server, as VS Code holds it. */
export interface CommandLike {
  title: string;
  command: string;
  arguments?: unknown[];
}

/** The server's `mdsearch.related` command on a lens or hint becomes the related QuickPick;
 * any other command is left as it is. */
export function toRelatedPick<T extends CommandLike>(command: T): T {
  if (command.command !== ServerCommands.related) return command;
  return { ...command, command: SHOW_RELATED };
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/** Narrows an untrusted server reply to Hit[]; malformed entries are dropped rather than crashing
 * the QuickPick, because a half-written server should degrade to fewer results, not to an error. */
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
  if (typeof value.percentage === 'number' && Number.isFinite(value.percentage)) {
    out.percentage = value.percentage;
  }
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

function parseProgress(value: unknown): IndexProgress {
  const p = isRecord(value) ? value : {};
  const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  return { state: oneOf<IndexPhase>(p.state, indexPhases, 'empty'), files_done: num(p.files_done), files_total: num(p.files_total) };
}

function parseHolder(v: unknown): { pid: number; role: string } | null {
  if (!isRecord(v) || typeof v.pid !== 'number' || typeof v.role !== 'string') return null;
  return { pid: v.pid, role: v.role };
}

function parseFolder(f: Record<string, unknown>): FolderStatus {
  const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
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
