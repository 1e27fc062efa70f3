// What the editor half needs to know about the text around the cursor: whether a `[[` link is
// being typed, which section the cursor is in, and the server's edits as editor changes. Pure
// (no `obsidian` import), so each rule is tested in Node on plain strings.
import type { Range, TextEdit } from './protocol';

/** Obsidian's EditorPosition: 0-based line, `ch` in UTF-16 code units (what the plugin asks the
 * server to use, so LSP positions need no conversion). */
export interface EditorPos {
  line: number;
  ch: number;
}

export interface EditorChange {
  from: EditorPos;
  to: EditorPos;
  text: string;
}

/** The `[[` link being typed at `ch` of `lineText`: where its `[[` starts and what was typed
 * after it. Undefined once the link is closed, on an embed's `![[` too (the server completes
 * those the same way, so they count), and when a `|` alias is being typed (that part is the
 * user's own words, not a target to look up). */
export function linkTrigger(lineText: string, ch: number): { startCh: number; query: string } | undefined {
  const before = lineText.slice(0, ch);
  const open = before.lastIndexOf('[[');
  if (open < 0) return undefined;
  const typed = before.slice(open + 2);
  if (typed.includes(']]') || typed.includes('|') || typed.includes('[')) return undefined;
  return { startCh: open, query: typed };
}

const FENCE = /^ {0,3}(`{3,}|~{3,})/;
const HEADING = /^ {0,3}#{1,6}(\s|$)/;

/** Every ATX heading's line, skipping `#` lines inside fenced code (a fence closes on three or more
 * of its own character). */
function headingLines(text: string): number[] {
  const out: number[] = [];
  let fence: string | undefined;
  text.split('\n').forEach((l, i) => {
    const f = FENCE.exec(l);
    if (fence) {
      if (f && f[1]!.startsWith(fence)) fence = undefined;
    } else if (f) {
      fence = f[1]!.slice(0, 3);
    } else if (HEADING.test(l)) {
      out.push(i);
    }
  });
  return out;
}

/** The line of the heading that opens the section holding `line` (0 when the cursor is above
 * the first heading), ignoring `#` lines inside fenced code. The related view asks the server
 * about this line, so moving within one section sends nothing. */
export function sectionStart(text: string, line: number): number {
  return headingLines(text).filter((h) => h <= line).pop() ?? 0;
}

/** The heading's words on `line` ("Database migrations"), or "" when it is not a heading (the
 * text above a note's first heading, front matter included). */
export function headingText(text: string, line: number): string {
  const l = text.split('\n')[line] ?? '';
  return HEADING.test(l) ? l.replace(/^ {0,3}#{1,6}/, '').replace(/\s+#+\s*$/, '').trim() : '';
}

/** The last line of the section that starts at `start` (the line before the next heading of
 * any level, or the last line). */
export function sectionEnd(text: string, start: number): number {
  const next = headingLines(text).find((h) => h > start);
  return next !== undefined ? next - 1 : Math.max(start, text.split('\n').length - 1);
}

export function rangeToChange(range: Range, text: string): EditorChange {
  return {
    from: { line: range.start.line, ch: range.start.character },
    to: { line: range.end.line, ch: range.end.character },
    text,
  };
}

/** LSP edits as one editor transaction's changes. The server computed every range against the
 * same text, so they are applied together (one undo step), last first to be safe with editors
 * that apply them in order. */
export function toChanges(edits: TextEdit[]): EditorChange[] {
  return edits
    .map((e) => rangeToChange(e.range, e.newText))
    .sort((a, b) => b.from.line - a.from.line || b.from.ch - a.from.ch);
}

/** Where a chosen `[[` suggestion replaces text. The server's range runs from `[[` to the cursor
 * as it was (plus a closing `]]` already there); when the user typed on while the list was
 * open, the cursor is further right, and what was typed since is replaced too, along with the
 * `]]` Obsidian may have paired. */
export function linkReplacement(edit: TextEdit, cursor: EditorPos, lineText: string): EditorChange {
  const change = rangeToChange(edit.range, edit.newText);
  if (cursor.line === change.to.line && cursor.ch > change.to.ch) {
    let ch = cursor.ch;
    if (lineText.slice(ch, ch + 2) === ']]') ch += 2;
    change.to = { line: cursor.line, ch };
  }
  return change;
}
