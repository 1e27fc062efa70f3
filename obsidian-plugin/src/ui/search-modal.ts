// "Search notes by meaning": a SuggestModal that searches as the user types. Keystrokes are
// debounced and an answer to a query the user has typed past is dropped (LiveSearch), so the
// list never shows the results of an older query. The query goes to the server exactly as
// typed: filters (`tag:`, `path:`) are the server's to read, as in the CLI. Rows keep the
// server's order (a SuggestModal shows what getSuggestions returns, in that order).
import { type App, Keymap, SuggestModal } from 'obsidian';
import type MdsearchPlugin from '../main';
import { type HitRow, highlight, hitRow, LiveSearch } from '../client/search';

export class SearchModal extends SuggestModal<HitRow> {
  readonly live: LiveSearch<HitRow[]>;
  private lastQuery = '';

  constructor(app: App, private readonly plugin: MdsearchPlugin) {
    super(app);
    this.limit = plugin.settings.maxResults;
    this.setPlaceholder('Search notes by meaning (tag:name, path:folder/ to filter)');
    this.setInstructions([
      { command: '↑↓', purpose: 'to navigate' },
      { command: '↵', purpose: 'to open at the section' },
      { command: 'Ctrl/⌘ ↵', purpose: 'to open in a new tab' },
      { command: 'esc', purpose: 'to dismiss' },
    ]);
    this.live = new LiveSearch<HitRow[]>(async (query, token) => {
      const client = this.plugin.client;
      if (!client) return [];
      const hits = await client.search({ query, limit: this.plugin.settings.maxResults }, token);
      return hits.map(hitRow);
    }, []);
  }

  async getSuggestions(query: string): Promise<HitRow[]> {
    this.lastQuery = query;
    const why = this.plugin.unavailable();
    if (why && query.trim()) {
      this.emptyStateText = why;
      return [];
    }
    try {
      const rows = await this.live.request(query);
      this.emptyStateText = query.trim() ? 'No matching sections.' : 'Type what you are looking for, in your own words.';
      return rows;
    } catch (error) {
      // A cancelled request (typed past) resolves through the newer one; anything else is shown.
      this.emptyStateText = `mdsearch: ${error instanceof Error ? error.message : String(error)}`;
      return [];
    }
  }

  renderSuggestion(row: HitRow, el: HTMLElement): void {
    el.addClass('mdsearch-hit');
    const head = el.createDiv({ cls: 'mdsearch-hit-heading' });
    head.createSpan({ text: row.headingPath });
    const meta = el.createDiv({ cls: 'mdsearch-hit-note' });
    meta.createSpan({ text: row.note });
    if (row.score) meta.createSpan({ cls: 'mdsearch-hit-score', text: row.score });
    if (row.snippet) {
      const snippet = el.createDiv({ cls: 'mdsearch-hit-snippet' });
      for (const part of highlight(row.snippet, this.lastQuery)) {
        if (part.match) snippet.createEl('mark', { text: part.text });
        else snippet.appendText(part.text);
      }
    }
  }

  onChooseSuggestion(row: HitRow, evt: MouseEvent | KeyboardEvent): void {
    void this.plugin.openHit(row.hit, Keymap.isModEvent(evt));
  }

  override onClose(): void {
    this.live.cancel();
    super.onClose();
  }
}
