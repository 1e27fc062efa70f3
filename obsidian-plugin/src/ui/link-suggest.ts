// `[[` suggestions ranked by what the paragraph means: an EditorSuggest backed by the server's
// textDocument/completion on the live buffer. When the server is not running (or the setting
// is off) it does not trigger, so Obsidian's own link suggestions take over: typing a link
// never depends on the server being up.
import { type App, type Editor, type EditorPosition, EditorSuggest, type EditorSuggestContext, type EditorSuggestTriggerInfo, type TFile } from 'obsidian';
import type MdsearchPlugin from '../main';
import { linkReplacement, linkTrigger } from '../client/editing';
import type { LinkItem } from '../client/protocol';
import { isNote } from '../client/sync';

export class LinkSuggest extends EditorSuggest<LinkItem> {
  constructor(app: App, private readonly plugin: MdsearchPlugin) {
    super(app);
    this.limit = 20;
    this.setInstructions([
      { command: '↵', purpose: 'to insert the link' },
      { command: 'esc', purpose: 'to dismiss' },
    ]);
  }

  onTrigger(cursor: EditorPosition, editor: Editor, file: TFile | null): EditorSuggestTriggerInfo | null {
    if (!this.plugin.settings.linkSuggest || !this.plugin.client || !file || !isNote(file.path)) return null;
    const found = linkTrigger(editor.getLine(cursor.line), cursor.ch);
    if (!found) return null;
    return { start: { line: cursor.line, ch: found.startCh }, end: cursor, query: found.query };
  }

  async getSuggestions(context: EditorSuggestContext): Promise<LinkItem[]> {
    const client = this.plugin.client;
    const note = this.plugin.activeNote(true);
    if (!client || !note || note.path !== context.file.path) return [];
    try {
      return await client.completion(note.uri, context.end.line, context.end.ch);
    } catch {
      return []; // a restart in the middle of typing: no list this keystroke
    }
  }

  renderSuggestion(item: LinkItem, el: HTMLElement): void {
    el.addClass('mdsearch-link');
    el.createDiv({ cls: 'mdsearch-link-label', text: item.label });
    if (item.detail) el.createDiv({ cls: 'mdsearch-link-detail', text: item.detail });
  }

  selectSuggestion(item: LinkItem): void {
    const context = this.context;
    if (!context) return;
    const editor = context.editor;
    const cursor = editor.getCursor();
    const change = linkReplacement(item.edit, cursor, editor.getLine(cursor.line));
    editor.replaceRange(change.text, change.from, change.to);
    editor.setCursor({ line: change.from.line, ch: change.from.ch + change.text.length });
    this.close();
  }
}
