// A small stand-in for the `obsidian` module, covering only the API the plugin uses, so its
// wiring runs under Node's test runner (npm `obsidian` holds types only and the app cannot be
// installed here). The test bundle resolves `obsidian` to this file. Behaviour follows the
// documented API; what the app does beyond it (layout, CSS, real DOM) is out of scope, and the
// plugin's README lists what must be checked by hand inside Obsidian.
//
// Besides the API, each class has a few test helpers (fire an event, click a button, read what
// was rendered), marked "test helper".
import * as fs from 'node:fs';
import * as path from 'node:path';

// Obsidian plugins call window.setTimeout; under Node the global object stands in.
(globalThis as { window?: unknown }).window ??= globalThis;

// ---- elements ---------------------------------------------------------------------------------

interface ElOptions {
  cls?: string | string[];
  text?: string;
  attr?: Record<string, string>;
}

/** An element with Obsidian's helpers (createDiv, setText, ...) and just enough DOM. */
export class FakeEl {
  children: FakeEl[] = [];
  disabled = false;
  classes = new Set<string>();
  attrs = new Map<string, string>();
  ownText = '';
  value = '';
  /** The Settings rendered into this element (a settings tab's container). */
  settings: Setting[] = [];
  private listeners = new Map<string, ((evt: unknown) => void)[]>();

  constructor(readonly tag = 'div', readonly parent?: FakeEl) {}

  createEl(tag: string, options: ElOptions | string = {}): FakeEl {
    const el = new FakeEl(tag, this);
    const o = typeof options === 'string' ? { cls: options } : options;
    for (const c of [o.cls ?? []].flat()) if (c) el.classes.add(c);
    if (o.text !== undefined) el.ownText = o.text;
    for (const [k, v] of Object.entries(o.attr ?? {})) el.attrs.set(k, v);
    this.children.push(el);
    return el;
  }

  createDiv(options: ElOptions | string = {}): FakeEl {
    return this.createEl('div', options);
  }

  createSpan(options: ElOptions | string = {}): FakeEl {
    return this.createEl('span', options);
  }

  appendText(text: string): void {
    this.createEl('#text', { text });
  }

  empty(): void {
    this.children = [];
    this.ownText = '';
    this.settings = [];
  }

  setText(text: string): void {
    this.children = [];
    this.ownText = text;
  }

  addClass(...cls: string[]): void {
    for (const c of cls) this.classes.add(c);
  }

  removeClass(...cls: string[]): void {
    for (const c of cls) this.classes.delete(c);
  }

  toggleClass(cls: string, on: boolean): void {
    if (on) this.classes.add(cls);
    else this.classes.delete(cls);
  }

  hasClass(cls: string): boolean {
    return this.classes.has(cls);
  }

  setAttr(name: string, value: string | number | boolean | null): void {
    if (value === null) this.attrs.delete(name);
    else this.attrs.set(name, String(value));
  }

  getAttr(name: string): string | null {
    return this.attrs.get(name) ?? null;
  }

  addEventListener(type: string, listener: (evt: unknown) => void): void {
    const list = this.listeners.get(type) ?? [];
    list.push(listener);
    this.listeners.set(type, list);
  }

  get textContent(): string {
    return this.ownText + this.children.map((c) => c.textContent).join('');
  }

  /** Test helper: dispatches an event to this element's listeners. */
  dispatch(type: string, evt: unknown = {}): void {
    for (const l of this.listeners.get(type) ?? []) l(evt);
  }

  /** Test helper: a click, with modifier keys if given. */
  click(evt: Partial<MouseEvent> = {}): void {
    this.dispatch('click', { ctrlKey: false, metaKey: false, ...evt });
  }

  /** Test helper: every descendant with this class (or tag, for "button"/"mark"). */
  findAll(sel: string): FakeEl[] {
    const out: FakeEl[] = [];
    const walk = (el: FakeEl): void => {
      for (const c of el.children) {
        if (c.classes.has(sel) || c.tag === sel) out.push(c);
        walk(c);
      }
    };
    walk(this);
    return out;
  }

  find(sel: string): FakeEl | undefined {
    return this.findAll(sel)[0];
  }
}

const asEl = (el: FakeEl): HTMLElement => el as unknown as HTMLElement;

// ---- events and files -------------------------------------------------------------------------

export interface EventRef {
  owner: Events;
  name: string;
  fn: (...args: unknown[]) => unknown;
}

export class Events {
  private handlers = new Map<string, EventRef[]>();

  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- each subclass narrows it
  on(name: string, fn: (...args: any[]) => unknown): EventRef {
    const ref: EventRef = { owner: this, name, fn: fn as (...args: unknown[]) => unknown };
    this.handlers.set(name, [...(this.handlers.get(name) ?? []), ref]);
    return ref;
  }

  offref(ref: EventRef): void {
    this.handlers.set(ref.name, (this.handlers.get(ref.name) ?? []).filter((r) => r !== ref));
  }

  trigger(name: string, ...args: unknown[]): void {
    for (const ref of this.handlers.get(name) ?? []) ref.fn(...args);
  }

  /** Test helper: how many handlers listen to `name`. */
  listenerCount(name: string): number {
    return (this.handlers.get(name) ?? []).length;
  }
}

export abstract class TAbstractFile {
  constructor(public path: string) {}

  get name(): string {
    return this.path.split('/').pop() ?? this.path;
  }
}

export class TFile extends TAbstractFile {
  get extension(): string {
    return this.name.includes('.') ? (this.name.split('.').pop() ?? '') : '';
  }

  get basename(): string {
    return this.name.replace(/\.[^.]*$/, '');
  }
}

export class TFolder extends TAbstractFile {}

export class FileSystemAdapter {
  constructor(private readonly basePath: string) {}

  getBasePath(): string {
    return this.basePath;
  }
}

export class Vault extends Events {
  readonly adapter: FileSystemAdapter;
  configDir = '.obsidian';

  constructor(readonly root: string) {
    super();
    this.adapter = new FileSystemAdapter(root);
  }

  override on(name: 'modify' | 'create' | 'delete', fn: (file: TAbstractFile) => unknown): EventRef;
  override on(name: 'rename', fn: (file: TAbstractFile, oldPath: string) => unknown): EventRef;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override on(name: string, fn: (...args: any[]) => unknown): EventRef {
    return super.on(name, fn);
  }

  getAbstractFileByPath(p: string): TAbstractFile | null {
    const full = path.join(this.root, ...p.split('/'));
    if (!fs.existsSync(full)) return null;
    return fs.statSync(full).isDirectory() ? new TFolder(p) : new TFile(p);
  }

  async read(file: TFile): Promise<string> {
    return fs.readFileSync(path.join(this.root, ...file.path.split('/')), 'utf8');
  }

  cachedRead(file: TFile): Promise<string> {
    return this.read(file);
  }
}

// ---- editor and views -------------------------------------------------------------------------

export interface EditorPosition {
  line: number;
  ch: number;
}

export interface EditorRange {
  from: EditorPosition;
  to: EditorPosition;
}

/** A plain-text editor with Obsidian's Editor methods the plugin calls. */
export class Editor {
  private lines: string[];
  private cursor: EditorPosition = { line: 0, ch: 0 };
  /** Test helper: the range last scrolled to. */
  scrolledTo: EditorRange | undefined;

  constructor(text = '', private readonly onChange?: () => void) {
    this.lines = text.split('\n');
  }

  getValue(): string {
    return this.lines.join('\n');
  }

  setValue(text: string): void {
    this.lines = text.split('\n');
    this.onChange?.();
  }

  getLine(line: number): string {
    return this.lines[line] ?? '';
  }

  lineCount(): number {
    return this.lines.length;
  }

  getCursor(): EditorPosition {
    return { ...this.cursor };
  }

  setCursor(pos: EditorPosition | number, ch?: number): void {
    this.cursor = typeof pos === 'number' ? { line: pos, ch: ch ?? 0 } : { ...pos };
  }

  private offset(pos: EditorPosition): number {
    let n = 0;
    for (let i = 0; i < pos.line; i++) n += (this.lines[i] ?? '').length + 1;
    return n + pos.ch;
  }

  replaceRange(text: string, from: EditorPosition, to?: EditorPosition): void {
    const value = this.getValue();
    const a = this.offset(from);
    const b = to ? this.offset(to) : a;
    this.lines = (value.slice(0, a) + text + value.slice(b)).split('\n');
    this.onChange?.();
  }

  transaction(tx: { changes?: { from: EditorPosition; to?: EditorPosition; text: string }[] }): void {
    // Obsidian applies a transaction's changes against the text before it; the plugin sends them
    // last first, so applying them one by one is the same.
    for (const c of tx.changes ?? []) this.replaceRange(c.text, c.from, c.to);
  }

  scrollIntoView(range: EditorRange, _center?: boolean): void {
    this.scrolledTo = range;
  }
}

export abstract class View {
  containerEl = new FakeEl();
  constructor(readonly leaf: WorkspaceLeaf) {}
  abstract getViewType(): string;
  abstract getDisplayText(): string;
  getIcon(): string {
    return '';
  }
  protected async onOpen(): Promise<void> {}
  protected async onClose(): Promise<void> {}
  /** Test helpers: the app opens and closes views. */
  async open(): Promise<void> {
    await this.onOpen();
  }
  async close(): Promise<void> {
    await this.onClose();
  }
}

export abstract class ItemView extends View {
  contentEl: HTMLElement = asEl(this.containerEl.createDiv({ cls: 'view-content' }));

  addAction(_icon: string, _title: string, callback: (evt: MouseEvent) => unknown): HTMLElement {
    const el = new FakeEl('button');
    el.addEventListener('click', (evt) => callback(evt as MouseEvent));
    return asEl(el);
  }
}

export class MarkdownView extends View {
  editor: Editor;
  constructor(leaf: WorkspaceLeaf, public file: TFile | null, text: string) {
    super(leaf);
    this.editor = new Editor(text, () => leaf.workspace.trigger('editor-change', this.editor, this));
  }
  getViewType(): string {
    return 'markdown';
  }
  getDisplayText(): string {
    return this.file?.basename ?? '';
  }
}

export class WorkspaceLeaf {
  view: View | undefined;
  /** Test helper: what openFile was asked. */
  opened: { path: string; eState?: Record<string, unknown> }[] = [];

  constructor(readonly workspace: Workspace, readonly where: 'main' | 'right' = 'main') {}

  async openFile(file: TFile, state: { eState?: Record<string, unknown> } = {}): Promise<void> {
    const text = await this.workspace.app.vault.read(file);
    this.opened.push({ path: file.path, eState: state.eState });
    this.view = new MarkdownView(this, file, text);
    this.workspace.setActiveLeaf(this);
    this.workspace.trigger('file-open', file);
  }

  async setViewState(state: { type: string; active?: boolean }): Promise<void> {
    const factory = this.workspace.app.viewFactories.get(state.type);
    if (!factory) throw new Error(`no view registered for ${state.type}`);
    await this.view?.close();
    this.view = factory(this);
    await this.view.open();
  }
}

export class Workspace extends Events {
  leaves: WorkspaceLeaf[] = [];
  activeLeaf: WorkspaceLeaf | null = null;
  private ready: (() => unknown)[] = [];
  layoutIsReady = false;
  /** Test helper: each getLeaf call's argument. */
  getLeafCalls: unknown[] = [];
  /** Not in the public API: the app's editor suggests in the order it asks them, the built-in
   * `[[` list first (what plugins reorder). */
  editorSuggest: { suggests: unknown[] } = { suggests: [{ builtin: 'link-suggest' }] };

  constructor(readonly app: App) {
    super();
  }

  override on(name: 'active-leaf-change', fn: (leaf: WorkspaceLeaf | null) => unknown): EventRef;
  override on(name: 'file-open', fn: (file: TFile | null) => unknown): EventRef;
  override on(name: 'editor-change', fn: (editor: Editor, info: MarkdownView) => unknown): EventRef;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override on(name: string, fn: (...args: any[]) => unknown): EventRef {
    return super.on(name, fn);
  }

  onLayoutReady(callback: () => unknown): void {
    if (this.layoutIsReady) callback();
    else this.ready.push(callback);
  }

  /** Test helper: the app finished loading its layout. */
  fireLayoutReady(): void {
    this.layoutIsReady = true;
    for (const cb of this.ready.splice(0)) cb();
  }

  getActiveViewOfType<T extends View>(type: abstract new (...args: never[]) => T): T | null {
    const view = this.activeLeaf?.view;
    return view instanceof type ? (view as T) : null;
  }

  getLeaf(newLeaf?: boolean | string): WorkspaceLeaf {
    this.getLeafCalls.push(newLeaf ?? false);
    const main = this.leaves.filter((l) => l.where === 'main');
    const current = this.activeLeaf?.where === 'main' ? this.activeLeaf : main[0];
    if (newLeaf || !current) {
      const leaf = new WorkspaceLeaf(this);
      this.leaves.push(leaf);
      return leaf;
    }
    return current;
  }

  getRightLeaf(_split: boolean): WorkspaceLeaf {
    const leaf = new WorkspaceLeaf(this, 'right');
    this.leaves.push(leaf);
    return leaf;
  }

  getLeavesOfType(type: string): WorkspaceLeaf[] {
    return this.leaves.filter((l) => l.view?.getViewType() === type);
  }

  async revealLeaf(_leaf: WorkspaceLeaf): Promise<void> {}

  setActiveLeaf(leaf: WorkspaceLeaf): void {
    this.activeLeaf = leaf;
    this.trigger('active-leaf-change', leaf);
  }

  /** Test helper: the user opens a note in the main pane. */
  async openNote(p: string): Promise<MarkdownView> {
    const leaf = this.getLeaf(false);
    await leaf.openFile(new TFile(p));
    return leaf.view as MarkdownView;
  }

  /** Test helper: the user closes a leaf. */
  async closeLeaf(leaf: WorkspaceLeaf): Promise<void> {
    await leaf.view?.close();
    this.leaves = this.leaves.filter((l) => l !== leaf);
    if (this.activeLeaf === leaf) this.activeLeaf = null;
    this.trigger('active-leaf-change', this.activeLeaf);
  }
}

export class App {
  vault: Vault;
  workspace: Workspace;
  /** Test helpers: what plugins registered. */
  commands = new Map<string, Command>();
  viewFactories = new Map<string, (leaf: WorkspaceLeaf) => View>();
  editorSuggests: EditorSuggest<unknown>[] = [];
  editorExtensions: unknown[] = [];
  settingTabs: PluginSettingTab[] = [];
  statusBar = new FakeEl();
  ribbon = new FakeEl();
  private storage = new Map<string, unknown>();

  constructor(root: string) {
    this.vault = new Vault(root);
    this.workspace = new Workspace(this);
  }

  loadLocalStorage(key: string): unknown {
    return this.storage.has(key) ? this.storage.get(key) : null;
  }

  saveLocalStorage(key: string, data: unknown): void {
    if (data === null) this.storage.delete(key);
    else this.storage.set(key, data);
  }
}

// ---- plugin -----------------------------------------------------------------------------------

export interface Command {
  id: string;
  name: string;
  callback?: () => unknown;
  hotkeys?: { modifiers: string[]; key: string }[];
}

export interface PluginManifest {
  id: string;
  name: string;
  version: string;
}

export abstract class Component {
  private cleanups: (() => void)[] = [];

  onload(): void | Promise<void> {}
  onunload(): void {}

  register(cb: () => unknown): void {
    this.cleanups.push(() => void cb());
  }

  registerEvent(ref: EventRef): void {
    this.cleanups.push(() => ref.owner.offref(ref));
  }

  /** Test helpers: Obsidian calls these when a plugin is enabled and disabled. */
  async load(): Promise<void> {
    await this.onload();
  }

  unload(): void {
    for (const cleanup of this.cleanups.splice(0).reverse()) cleanup();
    this.onunload();
  }
}

export abstract class Plugin extends Component {
  settings?: unknown;
  /** Test helper: data.json's content, as JSON text (what saveData wrote). */
  dataJson: string | undefined;

  constructor(readonly app: App, readonly manifest: PluginManifest) {
    super();
  }

  async loadData(): Promise<unknown> {
    return this.dataJson === undefined ? null : JSON.parse(this.dataJson);
  }

  async saveData(data: unknown): Promise<void> {
    this.dataJson = JSON.stringify(data);
  }

  addCommand(command: Command): Command {
    this.app.commands.set(command.id, command);
    return command;
  }

  addStatusBarItem(): HTMLElement {
    return asEl(this.app.statusBar.createDiv({ cls: 'status-bar-item' }));
  }

  addRibbonIcon(_icon: string, title: string, callback: (evt: MouseEvent) => unknown): HTMLElement {
    const el = this.app.ribbon.createDiv({ attr: { 'aria-label': title } });
    el.addEventListener('click', (evt) => callback(evt as MouseEvent));
    return asEl(el);
  }

  addSettingTab(tab: PluginSettingTab): void {
    this.app.settingTabs.push(tab);
  }

  registerView(type: string, factory: (leaf: WorkspaceLeaf) => View): void {
    this.app.viewFactories.set(type, factory);
    this.register(() => this.app.viewFactories.delete(type));
  }

  registerEditorSuggest(suggest: EditorSuggest<unknown>): void {
    this.app.editorSuggests.push(suggest);
    this.app.workspace.editorSuggest.suggests.push(suggest);
  }

  registerEditorExtension(extension: unknown): void {
    this.app.editorExtensions.push(extension);
  }
}

export const Platform = { isDesktopApp: true, isDesktop: true, isMobile: false };

export type PaneType = 'tab' | 'split' | 'window';

export class Keymap {
  static isModEvent(evt?: { ctrlKey?: boolean; metaKey?: boolean } | null): PaneType | boolean {
    return evt && (evt.ctrlKey || evt.metaKey) ? 'tab' : false;
  }
}

export class Notice {
  /** Test helper: every notice shown, in order (a fragment's text). */
  static shown: string[] = [];
  /** Test helper: the notices whose message is a fragment (to press its buttons). */
  static fragments: FakeEl[] = [];
  constructor(readonly message: string | DocumentFragment, readonly duration?: number) {
    if (typeof message === 'string') {
      Notice.shown.push(message);
    } else {
      const el = message as unknown as FakeEl;
      Notice.shown.push(el.textContent);
      Notice.fragments.push(el);
    }
  }
}

/** Obsidian's global createFragment: here an element holding what the callback made. */
(globalThis as { createFragment?: unknown }).createFragment = (callback?: (el: DocumentFragment) => void): DocumentFragment => {
  const el = new FakeEl('#fragment');
  callback?.(el as unknown as DocumentFragment);
  return el as unknown as DocumentFragment;
};

export function setIcon(_el: HTMLElement, _icon: string): void {}

// ---- modals and suggests ----------------------------------------------------------------------

export interface Instruction {
  command: string;
  purpose: string;
}

export class Modal {
  /** Test helper: the modals open now. */
  static openModals: Modal[] = [];
  contentEl = new FakeEl();
  titleEl = new FakeEl();
  constructor(readonly app: App) {}
  setTitle(title: string): this {
    this.titleEl.setText(title);
    return this;
  }
  open(): void {
    Modal.openModals.push(this);
    void this.onOpen();
  }
  close(): void {
    Modal.openModals = Modal.openModals.filter((m) => m !== this);
    this.onClose();
  }
  onOpen(): void | Promise<void> {}
  onClose(): void {}
}

export abstract class SuggestModal<T> extends Modal {
  limit = 100;
  emptyStateText = 'No results found.';
  inputEl = { value: '' } as unknown as HTMLInputElement;
  placeholder = '';
  instructions: Instruction[] = [];
  setPlaceholder(placeholder: string): void {
    this.placeholder = placeholder;
  }
  setInstructions(instructions: Instruction[]): void {
    this.instructions = instructions;
  }
  abstract getSuggestions(query: string): T[] | Promise<T[]>;
  abstract renderSuggestion(value: T, el: HTMLElement): void;
  abstract onChooseSuggestion(item: T, evt: MouseEvent | KeyboardEvent): void;

  /** Test helper: the user typed `query`; the rows as Obsidian would render them, in order. */
  async type(query: string): Promise<{ items: T[]; els: FakeEl[] }> {
    (this.inputEl as unknown as { value: string }).value = query;
    const items = (await this.getSuggestions(query)).slice(0, this.limit);
    const els = items.map((item) => {
      const el = new FakeEl();
      this.renderSuggestion(item, asEl(el));
      return el;
    });
    return { items, els };
  }
}

export interface EditorSuggestTriggerInfo {
  start: EditorPosition;
  end: EditorPosition;
  query: string;
}

export interface EditorSuggestContext extends EditorSuggestTriggerInfo {
  editor: Editor;
  file: TFile;
}

export abstract class EditorSuggest<T> {
  context: EditorSuggestContext | null = null;
  limit = 100;
  instructions: Instruction[] = [];
  constructor(readonly app: App) {}
  setInstructions(instructions: Instruction[]): void {
    this.instructions = instructions;
  }
  open(): void {}
  close(): void {
    this.context = null;
  }
  abstract onTrigger(cursor: EditorPosition, editor: Editor, file: TFile | null): EditorSuggestTriggerInfo | null;
  abstract getSuggestions(context: EditorSuggestContext): T[] | Promise<T[]>;
  abstract renderSuggestion(value: T, el: HTMLElement): void;
  abstract selectSuggestion(value: T, evt: MouseEvent | KeyboardEvent): void;

  /** Test helper: what Obsidian does on a keystroke in `view`: trigger, then ask for items. */
  async keystroke(view: MarkdownView): Promise<T[] | null> {
    const editor = view.editor;
    const info = this.onTrigger(editor.getCursor(), editor, view.file);
    if (!info || !view.file) {
      this.context = null;
      return null;
    }
    this.context = { ...info, editor, file: view.file };
    return this.getSuggestions(this.context);
  }
}

// ---- settings ---------------------------------------------------------------------------------

/** A row of the declarative settings API (Obsidian 1.13+); the plugin uses `render` rows only. */
export interface SettingDefinitionItem {
  name: string;
  desc?: string;
  render?: (setting: Setting) => void;
}

export abstract class PluginSettingTab {
  containerEl: HTMLElement = asEl(new FakeEl());
  constructor(readonly app: App, _plugin: Plugin) {}
  getSettingDefinitions(): SettingDefinitionItem[] {
    return [];
  }
  abstract display(): void;
  hide(): void {}

  /** Test helper: what Obsidian 1.13+ does with the definitions (a row each: name, description,
   * then the row's own render). */
  renderDefinitions(): void {
    const container = this.containerEl as unknown as FakeEl;
    container.empty();
    for (const item of this.getSettingDefinitions()) {
      const setting = new Setting(this.containerEl).setName(item.name).setDesc(item.desc ?? '');
      item.render?.(setting);
    }
  }
}

type Handler<V> = (value: V) => unknown;

class ValueComponent<V> {
  value: V;
  handler: Handler<V> | undefined;
  constructor(initial: V) {
    this.value = initial;
  }
  setValue(value: V): this {
    this.value = value;
    return this;
  }
  getValue(): V {
    return this.value;
  }
  onChange(handler: Handler<V>): this {
    this.handler = handler;
    return this;
  }
  setPlaceholder(_p: string): this {
    return this;
  }
  /** Test helper: the user changed the value. */
  async change(value: V): Promise<void> {
    this.value = value;
    await this.handler?.(value);
  }
}

export class TextComponent extends ValueComponent<string> {}
export class TextAreaComponent extends ValueComponent<string> {}
export class ToggleComponent extends ValueComponent<boolean> {}
export class DropdownComponent extends ValueComponent<string> {
  options = new Map<string, string>();
  addOption(value: string, display: string): this {
    this.options.set(value, display);
    return this;
  }
}

export class ButtonComponent {
  text = '';
  handler: (() => unknown) | undefined;
  setButtonText(text: string): this {
    this.text = text;
    return this;
  }
  setCta(): this {
    return this;
  }
  onClick(handler: () => unknown): this {
    this.handler = handler;
    return this;
  }
  /** Test helper: the user pressed the button. */
  async press(): Promise<void> {
    await this.handler?.();
  }
}

type AnyComponent = TextComponent | TextAreaComponent | ToggleComponent | DropdownComponent | ButtonComponent;

export class Setting {
  name = '';
  desc = '';
  components: AnyComponent[] = [];
  descEl: HTMLElement = asEl(new FakeEl());

  constructor(containerEl: HTMLElement) {
    (containerEl as unknown as FakeEl).settings.push(this);
  }

  setName(name: string): this {
    this.name = name;
    return this;
  }

  setDesc(desc: string): this {
    this.desc = desc;
    (this.descEl as unknown as FakeEl).setText(desc);
    return this;
  }

  private add<C extends AnyComponent>(component: C, cb: (c: C) => unknown): this {
    this.components.push(component);
    cb(component);
    return this;
  }

  addText(cb: (c: TextComponent) => unknown): this {
    return this.add(new TextComponent(''), cb);
  }

  addTextArea(cb: (c: TextAreaComponent) => unknown): this {
    return this.add(new TextAreaComponent(''), cb);
  }

  addToggle(cb: (c: ToggleComponent) => unknown): this {
    return this.add(new ToggleComponent(false), cb);
  }

  addDropdown(cb: (c: DropdownComponent) => unknown): this {
    return this.add(new DropdownComponent(''), cb);
  }

  addButton(cb: (c: ButtonComponent) => unknown): this {
    return this.add(new ButtonComponent(), cb);
  }

  /** Test helper: the settings of a container, by name. */
  static named(containerEl: HTMLElement, name: string): Setting {
    const found = (containerEl as unknown as FakeEl).settings.find((s) => s.name === name);
    if (!found) throw new Error(`no setting named ${name}`);
    return found;
  }
}
