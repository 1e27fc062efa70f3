// mdsearch for Obsidian: the plugin Obsidian loads. It owns one `mdsearch serve` process for the
// vault (started when the layout is ready, stopped on unload, restarted after a crash) and turns
// Obsidian's world into LSP: vault events become file notifications, the active note is the one
// open document, and the UI (search modal, related view, `[[` suggestions, status bar, settings)
// asks the server. The index lives in the user's cache folder, never in the vault: nothing here
// writes a file, and every edit the server proposes goes through the editor, undoable.
import { type Editor, FileSystemAdapter, MarkdownView, Notice, Platform, Plugin, TFile, TFolder } from 'obsidian';
import { EditorView, type ViewUpdate } from '@codemirror/view';
import { sectionStart } from './client/editing';
import { type LspClient } from './client/lsp';
import { installServer, type InstallOptions } from './client/install';
import { locateServer, type ServerCommand } from './client/locate';
import type { Hit, Mention, StatusParams } from './client/protocol';
import { DEFAULT_SETTINGS, EXECUTABLE_KEY, normalizeSettings, type PluginSettings, toServerSettings } from './client/settings';
import { renderStatus, type StatusView } from './client/status';
import { ServerSupervisor } from './client/supervisor';
import { isNote, VaultSync } from './client/sync';
import { LinkSuggest } from './ui/link-suggest';
import { RELATED_VIEW, RelatedView } from './ui/related-view';
import { InstallModal } from './ui/install-modal';
import { SearchModal } from './ui/search-modal';
import { MdsearchSettingTab } from './ui/settings-tab';

/** The note in the active editor, its buffer as last sent to the server, and the cursor. */
export interface ActiveNote {
  path: string;
  uri: string;
  editor: Editor;
  text: string;
  line: number;
}

export type PluginEvent = 'status' | 'mentions' | 'cursor' | 'note';

/** Buffer edits reach the server after this pause in typing (the server re-reads the whole
 * document each time); anything that reads the buffer (completion, actions) flushes first. */
const EDIT_FLUSH_MS = 300;

export default class MdsearchPlugin extends Plugin {
  override settings: PluginSettings = { ...DEFAULT_SETTINGS };
  /** Per device (local storage), never in the synced data.json. */
  executable = '';
  root = '';
  supervisor!: ServerSupervisor;
  sync!: VaultSync;
  serverStatus: StatusParams | undefined;
  statusView: StatusView = { text: 'mdsearch: starting', tooltip: '', error: false };
  private statusEl: HTMLElement | undefined;
  private mentions = new Map<string, Mention[]>();
  private listeners = new Map<PluginEvent, Set<() => void>>();
  private editTimer: number | undefined;
  private lastCursor: { path: string; section: number } | undefined;
  /** The last markdown editor that was active: clicking into the related view (or any other
   * pane) must not make the note under discussion disappear. */
  private noteView: MarkdownView | undefined;

  override async onload(): Promise<void> {
    if (!Platform.isDesktopApp) {
      new Notice('The mdsearch plugin runs its search server as a separate program, which needs the desktop app.');
      return;
    }
    await this.loadSettings();
    const adapter = this.app.vault.adapter;
    if (!(adapter instanceof FileSystemAdapter)) {
      new Notice('This vault is not a folder on disk, so the mdsearch server cannot index it.');
      return;
    }
    this.root = adapter.getBasePath();
    this.supervisor = new ServerSupervisor({
      locate: () => locateServer({ setting: this.executable }),
      client: {
        root: this.root,
        settings: () => toServerSettings(this.settings),
        onStatus: (status) => {
          this.serverStatus = status;
          this.refreshStatus();
        },
        onMentions: (uri, mentions) => {
          this.mentions.set(uri, mentions);
          this.emit('mentions');
        },
        onMessage: (message, type) => {
          // 1 error, 2 warning: the user should see those (a folder too large, an index error).
          if (type <= 2) new Notice(message, 10_000);
        },
      },
      onState: () => this.refreshStatus(),
      onNotice: (message, notFound) => (notFound && !this.executable ? this.offerInstall(message) : new Notice(message, 15_000)),
      onClient: () => {
        this.mentions.clear();
        this.sync.reattach();
      },
    });
    this.sync = new VaultSync(this.root, () => this.supervisor.client);

    this.statusEl = this.addStatusBarItem();
    this.statusEl.addClass('mdsearch-status');
    this.statusEl.addEventListener('click', () => new Notice(this.statusView.tooltip || this.statusView.text));
    this.refreshStatus();

    this.registerView(RELATED_VIEW, (leaf) => new RelatedView(leaf, this));
    this.addCommand({
      id: 'search',
      name: 'Search notes by meaning',
      callback: () => new SearchModal(this.app, this).open(),
    });
    this.addCommand({ id: 'open-related', name: 'Show related sections', callback: () => void this.showRelated() });
    this.addCommand({ id: 'rebuild-index', name: 'Rebuild index', callback: () => void this.rebuildIndex() });
    this.addCommand({ id: 'restart-server', name: 'Restart server', callback: () => void this.supervisor.restart() });
    this.addRibbonIcon('search', 'Search notes by meaning', () => new SearchModal(this.app, this).open());
    const links = new LinkSuggest(this.app, this);
    this.registerEditorSuggest(links);
    this.putFirst(links);
    this.registerEditorExtension(EditorView.updateListener.of((update: ViewUpdate) => {
      if (update.selectionSet) this.cursorMoved();
    }));
    this.addSettingTab(new MdsearchSettingTab(this.app, this));
    this.app.workspace.onLayoutReady(() => this.layoutReady());
  }

  /** Obsidian asks its editor suggests in order and the first that triggers wins; a plugin's is
   * added after the built-in `[[` list, so it would never show. Moved to the front through the
   * workspace's (undocumented) list, as link-suggestion plugins do; when that list is not there
   * Obsidian's own list stays in charge. Ours declines to trigger while the server is down or
   * the setting is off, which hands `[[` back to Obsidian's. */
  private putFirst(suggest: LinkSuggest): void {
    const internal = (this.app.workspace as unknown as { editorSuggest?: { suggests?: unknown[] } }).editorSuggest;
    const list = internal?.suggests;
    if (!Array.isArray(list)) return;
    const at = list.indexOf(suggest);
    if (at > 0) {
      list.splice(at, 1);
      list.unshift(suggest);
    }
  }

  override onunload(): void {
    window.clearTimeout(this.editTimer);
    void this.supervisor?.stop();
  }

  /** Vault events are registered here, not in onload: Obsidian fires `create` for every file
   * while it loads the vault, and the server indexes the folder itself at start. */
  private layoutReady(): void {
    const { vault, workspace } = this.app;
    this.registerEvent(vault.on('modify', (file) => {
      if (!(file instanceof TFile)) return;
      const active = this.activeNote(false);
      this.sync.modify(file.path, active?.path === file.path ? active.editor.getValue() : undefined);
      this.emit('note');
    }));
    this.registerEvent(vault.on('create', (file) => this.sync.create(file.path, file instanceof TFolder)));
    this.registerEvent(vault.on('delete', (file) => this.sync.delete(file.path, file instanceof TFolder)));
    this.registerEvent(vault.on('rename', (file, oldPath) => this.sync.rename(file.path, oldPath, file instanceof TFolder)));
    this.registerEvent(workspace.on('active-leaf-change', () => this.activeChanged()));
    this.registerEvent(workspace.on('file-open', () => this.activeChanged()));
    this.registerEvent(workspace.on('editor-change', () => this.scheduleFlush()));
    void this.supervisor.start().then(() => this.activeChanged());
    this.activeChanged();
  }

  // ---- settings -------------------------------------------------------------------------------

  async loadSettings(): Promise<void> {
    this.settings = normalizeSettings(await this.loadData());
    const stored: unknown = this.app.loadLocalStorage(EXECUTABLE_KEY);
    this.executable = typeof stored === 'string' ? stored : '';
  }

  /** Saves data.json and tells the running server, which applies settings without a restart. */
  async saveSettings(): Promise<void> {
    await this.saveData(this.settings);
    this.supervisor.client?.didChangeConfiguration();
  }

  /** A new executable path: stored for this device only, and the server started from it. */
  async setExecutable(value: string): Promise<void> {
    this.executable = value.trim();
    this.app.saveLocalStorage(EXECUTABLE_KEY, this.executable || null);
    await this.supervisor.restart();
  }

  // ---- the server -----------------------------------------------------------------------------

  /** mdsearch was not found: the reason, and a button that opens the install dialog. Stays until
   * dismissed (a missing server is not retried, so this is said once). */
  private offerInstall(message: string): void {
    const fragment = createFragment((f) => {
      f.createDiv({ text: message });
      f.createEl('button', { text: 'Install mdsearch', cls: 'mod-cta' }).addEventListener('click', () => new InstallModal(this.app, this).open());
    });
    new Notice(fragment, 0);
  }

  /** Installs mdsearch into the private environment (the server stops first: Windows keeps a
   * running program's files) and starts the server again, from it unless a setting names another. */
  async installServer(progress: Pick<InstallOptions, 'onStep' | 'onLog'>): Promise<ServerCommand> {
    await this.supervisor.stop();
    try {
      return await installServer(progress);
    } finally {
      await this.supervisor.restart();
    }
  }

  get client(): LspClient | undefined {
    return this.supervisor?.client;
  }

  /** Why there is no answer right now, for empty lists ("mdsearch: indexing 12 of 40"). */
  unavailable(): string | undefined {
    if (!this.client) return this.statusView.error ? `${this.statusView.text}: ${this.statusView.tooltip}` : this.statusView.text;
    return undefined;
  }

  async rebuildIndex(): Promise<void> {
    const client = this.client;
    if (!client) {
      new Notice(this.unavailable() ?? 'mdsearch: the server is not running');
      return;
    }
    try {
      await client.reindex();
      new Notice('Rebuilding the mdsearch index from the notes');
    } catch (error) {
      new Notice(`mdsearch: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  private refreshStatus(): void {
    if (!this.supervisor) return;
    this.statusView = renderStatus(this.supervisor.state, this.serverStatus);
    if (this.statusEl) {
      this.statusEl.setText(this.statusView.text);
      this.statusEl.setAttr('aria-label', this.statusView.tooltip);
      this.statusEl.toggleClass('mdsearch-error', this.statusView.error);
    }
    this.emit('status');
  }

  mentionsFor(uri: string): Mention[] {
    return this.mentions.get(uri) ?? [];
  }

  // ---- the active note ------------------------------------------------------------------------

  /** The markdown note in the active editor, after sending its buffer to the server if it
   * changed (`flush`), so a request that follows reads what the user sees. */
  activeNote(flush = true): ActiveNote | undefined {
    const view = this.currentView();
    const file = view?.file;
    if (!view || !file || !isNote(file.path)) return undefined;
    const editor = view.editor;
    const text = editor.getValue();
    if (flush && this.sync.activePath === file.path) {
      window.clearTimeout(this.editTimer);
      this.sync.edit(file.path, text);
    }
    return { path: file.path, uri: this.sync.uri(file.path), editor, text, line: editor.getCursor().line };
  }

  private currentView(): MarkdownView | undefined {
    const { workspace } = this.app;
    const active = workspace.getActiveViewOfType(MarkdownView);
    if (active) this.noteView = active;
    const view = this.noteView;
    if (view?.file && workspace.getLeavesOfType('markdown').some((leaf) => leaf.view === view)) return view;
    this.noteView = undefined;
    return undefined;
  }

  private activeChanged(): void {
    const view = this.currentView();
    const file = view?.file;
    if (view && file && isNote(file.path)) this.sync.open(file.path, view.editor.getValue());
    else if (!view || !file) this.sync.open(undefined, '');
    this.lastCursor = undefined;
    this.cursorMoved();
    this.emit('note');
  }

  private scheduleFlush(): void {
    window.clearTimeout(this.editTimer);
    this.editTimer = window.setTimeout(() => {
      this.activeNote(true);
      this.emit('note');
    }, EDIT_FLUSH_MS);
  }

  /** The cursor moved: the related view follows only when it entered another section. */
  cursorMoved(): void {
    const note = this.activeNote(false);
    if (!note) return;
    const section = sectionStart(note.text, note.line);
    if (this.lastCursor?.path === note.path && this.lastCursor.section === section) return;
    this.lastCursor = { path: note.path, section };
    this.emit('cursor');
  }

  // ---- UI plumbing ----------------------------------------------------------------------------

  on(event: PluginEvent, listener: () => void): () => void {
    let set = this.listeners.get(event);
    if (!set) this.listeners.set(event, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  private emit(event: PluginEvent): void {
    for (const listener of this.listeners.get(event) ?? []) listener();
  }

  /** Opens a hit's note at its section; `newLeaf` (a modifier key) opens it in a new tab. */
  async openHit(hit: Hit, newLeaf: boolean | 'tab' | 'split' | 'window' = false): Promise<void> {
    const file = this.app.vault.getAbstractFileByPath(hit.path);
    if (!(file instanceof TFile)) {
      new Notice(`mdsearch: ${hit.path} is no longer in the vault`);
      return;
    }
    const leaf = this.app.workspace.getLeaf(newLeaf);
    // A PDF hit opens Obsidian's PDF view at its page (what a [[paper.pdf#page=3]] link does); a
    // hit in another converted document (include_formats) has lines of the converted text only.
    const eState = hit.page !== undefined ? { subpath: `#page=${hit.page}` }
      : hit.format !== undefined && hit.format !== 'org' ? {} : { line: hit.start_line };
    await leaf.openFile(file, { eState });
    if (leaf.view instanceof MarkdownView) {
      const editor = leaf.view.editor;
      const line = Math.min(hit.start_line, Math.max(0, editor.lineCount() - 1));
      editor.setCursor({ line, ch: 0 });
      editor.scrollIntoView({ from: { line, ch: 0 }, to: { line, ch: 0 } }, true);
    }
  }

  async showRelated(): Promise<void> {
    const { workspace } = this.app;
    let leaf = workspace.getLeavesOfType(RELATED_VIEW)[0];
    if (!leaf) {
      const right = workspace.getRightLeaf(false);
      if (!right) return;
      await right.setViewState({ type: RELATED_VIEW, active: true });
      leaf = right;
    }
    await workspace.revealLeaf(leaf);
  }
}
