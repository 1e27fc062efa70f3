// The wire contract with `mdsearch serve`. The command ids, hit and status shapes are the VS Code
// extension's (one definition for both clients: vscode-extension/src/protocol.ts has no runtime
// import); the LSP shapes the plugin reads besides those (completion items, code actions,
// diagnostics) are narrowed here, since a server reply is untrusted input.
export {
  type FolderStatus,
  type Hit,
  type IndexState,
  parseHits,
  parseStatus,
  type RelatedArgs,
  type SearchArgs,
  ServerCommands,
  type StatusParams,
  type StatusResult,
  StatusNotification,
} from '../../../vscode-extension/src/protocol';

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
