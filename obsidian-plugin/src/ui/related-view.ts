// The right-sidebar view: sections of other notes related to the section under the cursor, and
// the writing help the server has for it (a related section not linked yet, mentions of other
// notes' names that are not links), each with a one-click link. It follows the active note and
// asks again only when the cursor enters another section or the note is saved; an answer for a
// section the cursor has already left is dropped.
import { ItemView, Keymap, Notice, type WorkspaceLeaf } from 'obsidian';
import type MdsearchPlugin from '../main';
import { headingText, sectionEnd, sectionStart, toChanges } from '../client/editing';
import type { Hit, LinkAction, Mention } from '../client/protocol';
import { hitRow } from '../client/search';

export const RELATED_VIEW = 'mdsearch-related';
const REFRESH_MS = 250;
const RELATED_LIMIT = 10;

export interface RelatedModel {
  /** Vault path of the note, heading line of the section; undefined: no note is active. */
  path?: string;
  section?: number;
  heading?: string;
  hits: Hit[];
  suggestions: LinkAction[];
  mentions: Mention[];
  /** Why the list is empty (server not ready, an error). */
  message?: string;
}

export class RelatedView extends ItemView {
  model: RelatedModel = { hits: [], suggestions: [], mentions: [] };
  private timer: number | undefined;
  private generation = 0;
  private unsubscribe: (() => void)[] = [];
  /** Resolves when the refresh in flight (if any) has rendered; tests wait on it. */
  settled: Promise<void> = Promise.resolve();

  constructor(leaf: WorkspaceLeaf, private readonly plugin: MdsearchPlugin) {
    super(leaf);
  }

  getViewType(): string {
    return RELATED_VIEW;
  }

  getDisplayText(): string {
    return 'Related sections';
  }

  override getIcon(): string {
    return 'links-coming-in';
  }

  override async onOpen(): Promise<void> {
    const soon = () => this.schedule();
    this.unsubscribe = [
      this.plugin.on('cursor', soon),
      this.plugin.on('note', soon),
      this.plugin.on('status', () => {
        if (!this.model.hits.length) soon();
      }),
      this.plugin.on('mentions', () => this.updateMentions()),
    ];
    this.settled = this.refresh();
    await this.settled;
  }

  override async onClose(): Promise<void> {
    window.clearTimeout(this.timer);
    this.generation += 1;
    for (const off of this.unsubscribe) off();
    this.unsubscribe = [];
  }

  private schedule(): void {
    window.clearTimeout(this.timer);
    this.timer = window.setTimeout(() => {
      this.settled = this.refresh();
    }, REFRESH_MS);
  }

  private updateMentions(): void {
    const note = this.plugin.activeNote(false);
    if (!note || note.path !== this.model.path) return;
    this.model.mentions = this.plugin.mentionsFor(note.uri);
    this.render();
  }

  /** Asks the server about the section under the cursor and renders the answer. */
  async refresh(): Promise<void> {
    const generation = ++this.generation;
    const note = this.plugin.activeNote(true);
    const client = this.plugin.client;
    if (!note) {
      this.model = { hits: [], suggestions: [], mentions: [], message: 'Open a note to see related sections.' };
      this.render();
      return;
    }
    const section = sectionStart(note.text, note.line);
    const heading = headingText(note.text, section);
    const base = { path: note.path, section, heading, mentions: this.plugin.mentionsFor(note.uri) };
    if (!client) {
      this.model = { ...base, hits: [], suggestions: [], message: this.plugin.unavailable() };
      this.render();
      return;
    }
    try {
      const end = sectionEnd(note.text, section);
      const [hits, actions] = await Promise.all([
        client.related({ uri: note.uri, line: section, limit: RELATED_LIMIT }),
        client.codeActions(note.uri, { start: { line: section, character: 0 }, end: { line: end, character: 0 } }, ['quickfix']),
      ]);
      if (generation !== this.generation) return;
      const suggestions = actions.filter((a) => a.title.startsWith('Link to '));
      this.model = { ...base, hits, suggestions, message: hits.length ? undefined : 'No related sections in other notes.' };
    } catch (error) {
      if (generation !== this.generation) return;
      this.model = { ...base, hits: [], suggestions: [], message: `mdsearch: ${error instanceof Error ? error.message : String(error)}` };
    }
    this.render();
  }

  render(): void {
    const el = this.contentEl;
    el.empty();
    el.addClass('mdsearch-related');
    const m = this.model;
    if (m.path !== undefined) {
      const title = m.path.replace(/\.(md|markdown)$/i, '') + (m.heading ? ` › ${m.heading}` : '');
      el.createDiv({ cls: 'mdsearch-related-title', text: title });
    }
    if (m.message) el.createDiv({ cls: 'mdsearch-related-empty', text: m.message });
    const list = el.createDiv({ cls: 'mdsearch-related-list' });
    for (const hit of m.hits) {
      const row = hitRow(hit);
      const item = list.createDiv({ cls: 'mdsearch-related-item' });
      item.createDiv({ cls: 'mdsearch-hit-heading', text: row.headingPath });
      const meta = item.createDiv({ cls: 'mdsearch-hit-note' });
      meta.createSpan({ text: row.note });
      if (row.score) meta.createSpan({ cls: 'mdsearch-hit-score', text: row.score });
      item.addEventListener('click', (evt: MouseEvent) => void this.plugin.openHit(hit, Keymap.isModEvent(evt)));
    }
    if (m.suggestions.length || m.mentions.length) {
      el.createDiv({ cls: 'mdsearch-related-subtitle', text: 'Writing help' });
    }
    for (const action of m.suggestions) {
      const item = el.createDiv({ cls: 'mdsearch-related-help' });
      item.createSpan({ text: action.title.replace(/^Link to /, 'Related, not linked: ') });
      const button = item.createEl('button', { text: 'Insert link' });
      button.addEventListener('click', () => void this.apply(action.title, m.section ?? 0, ['quickfix']));
    }
    for (const mention of m.mentions) {
      const item = el.createDiv({ cls: 'mdsearch-related-help' });
      item.createSpan({ text: mention.message });
      const button = item.createEl('button', { text: 'Link' });
      button.addEventListener('click', () => void this.applyMention(mention));
    }
    if (m.mentions.length > 1) {
      const button = el.createEl('button', { cls: 'mdsearch-related-all', text: `Link every unlinked mention (${m.mentions.length})` });
      button.addEventListener('click', () => void this.applyKind('source.mdsearch.linkMentions'));
    }
  }

  /** Asks again for the action (on the buffer as it is now, so its ranges are current) and
   * applies its edit through the editor, as one undoable change. */
  async apply(title: string, line: number, only: string[]): Promise<boolean> {
    return this.applyFirst(line, line, only, (a) => a.title === title);
  }

  async applyMention(mention: Mention): Promise<boolean> {
    const same = (a: LinkAction) => a.title.startsWith('Link “') && a.edits.some((e) =>
      e.range.start.line === mention.range.start.line && e.range.start.character === mention.range.start.character);
    return this.applyFirst(mention.range.start.line, mention.range.end.line, ['quickfix'], same, mention);
  }

  async applyKind(kind: string): Promise<boolean> {
    return this.applyFirst(0, 0, [kind], (a) => a.kind === kind);
  }

  private async applyFirst(first: number, last: number, only: string[], pick: (a: LinkAction) => boolean, mention?: Mention): Promise<boolean> {
    const note = this.plugin.activeNote(true);
    const client = this.plugin.client;
    if (!note || !client) return false;
    const range = mention?.range ?? { start: { line: first, character: 0 }, end: { line: last, character: 0 } };
    const actions = await client.codeActions(note.uri, range, only);
    const action = actions.find(pick);
    if (!action) {
      new Notice('That link is no longer offered: the note changed.');
      return false;
    }
    if (note.editor.getValue() !== note.text) {
      new Notice('The note changed meanwhile; try again.');
      return false;
    }
    note.editor.transaction({ changes: toChanges(action.edits) });
    return true;
  }
}
