// The plugin's wiring (src/main.ts and src/ui/) under the stand-in `obsidian` module, against
// the real `mdsearch serve` on a copy of the examples vault: commands, the status bar, the
// search modal, the related view with its writing help, `[[` suggestions, vault events, the
// settings tab, rebuild and unload. What the stub cannot show (layout, CSS, Obsidian's own
// handling of a SuggestModal) is the README's manual checklist.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import MdsearchPlugin from '../src/main';
import { privateEnvDir } from '../src/client/locate';
import { EXECUTABLE_KEY } from '../src/client/settings';
import { LinkSuggest } from '../src/ui/link-suggest';
import { RELATED_VIEW, RelatedView } from '../src/ui/related-view';
import { InstallModal } from '../src/ui/install-modal';
import { SearchModal } from '../src/ui/search-modal';
import { MdsearchSettingTab } from '../src/ui/settings-tab';
import { listFiles, mdsearchExecutable, type TempVault, tempVault, until } from './helpers';
import { App, type FakeEl, Modal, Notice, Setting, TFile } from './stub/obsidian';

const READY_MS = 120_000;
const PLUGIN_DIR_FOR_SETTINGS = os.tmpdir();
const MANIFEST = { id: 'mdsearch', name: 'mdsearch', version: '0.1.0' };

function makePlugin(root: string, executable: string, env: NodeJS.ProcessEnv): { app: App; plugin: MdsearchPlugin } {
  const app = new App(root);
  app.saveLocalStorage(EXECUTABLE_KEY, executable);
  // The server inherits the plugin process's environment (as in Obsidian): point its index at
  // the test's cache folder.
  Object.assign(process.env, { MDSEARCH_CACHE_DIR: env.MDSEARCH_CACHE_DIR });
  const plugin = new MdsearchPlugin(app as never, MANIFEST as never);
  return { app, plugin };
}

const el = (e: unknown): FakeEl => e as FakeEl;

describe('the plugin in a stand-in Obsidian, on the real server', () => {
  let vault: TempVault;
  let app: App;
  let plugin: MdsearchPlugin;
  let vaultBefore: string[];

  before(async () => {
    vault = tempVault();
    vault.write('inbox/Plan.md', '# Plan\n\nBefore the freeze we read the Code review guidelines again.\n');
    vaultBefore = listFiles(vault.root);
    ({ app, plugin } = makePlugin(vault.root, mdsearchExecutable(), vault.env));
    await plugin.load();
    assert.equal(plugin.supervisor.state.kind, 'stopped', 'nothing starts before the layout is ready');
    app.workspace.fireLayoutReady();
    await until('the index to be ready', READY_MS, () => /^mdsearch: \d[\d,]* sections$/.test(plugin.statusView.text));
  });

  after(async () => {
    plugin?.unload();
    await until('the server to stop', 10_000, () => plugin.supervisor.state.kind === 'stopped');
    vault?.cleanup();
  });

  test('commands, ribbon, view, suggest and settings tab are registered', () => {
    assert.deepEqual([...app.commands.keys()].sort(), ['open-related', 'rebuild-index', 'restart-server', 'search']);
    assert.equal(app.commands.get('search')?.name, 'Search notes by meaning');
    assert.deepEqual([...app.commands.values()].filter((c) => c.hotkeys), [], 'no default hotkey (the user picks one)');
    assert.ok(app.viewFactories.has(RELATED_VIEW));
    assert.ok(app.editorSuggests[0] instanceof LinkSuggest);
    assert.equal(app.workspace.editorSuggest.suggests[0], app.editorSuggests[0], 'asked before the built-in [[ list');
    assert.deepEqual(app.workspace.editorSuggest.suggests[1], { builtin: 'link-suggest' });
    assert.ok(app.settingTabs[0] instanceof MdsearchSettingTab);
    assert.equal(app.editorExtensions.length, 1, 'the cursor listener');
    for (const name of ['modify', 'create', 'delete', 'rename']) assert.equal(app.vault.listenerCount(name), 1, name);
  });

  test('the status bar shows the section count and the server is the executable set on this device', () => {
    const bar = app.statusBar.find('mdsearch-status');
    assert.ok(bar);
    assert.equal(bar.textContent, plugin.statusView.text);
    const chunks = plugin.serverStatus?.folders[0]?.chunks ?? 0;
    assert.equal(bar.textContent, `mdsearch: ${chunks.toLocaleString('en-US')} sections`);
    assert.match(bar.getAttr('aria-label') ?? '', /index at /);
    assert.ok(!bar.hasClass('mdsearch-error'));
  });

  test('the search modal: rows in the server\'s order, heading path, note and highlighted snippet', async () => {
    app.commands.get('search')?.callback?.();
    const modal = Modal.openModals.at(-1);
    assert.ok(modal instanceof SearchModal);
    const query = 'how do we ship a new version to customers';
    const { items, els } = await modal.type(query);
    assert.ok(items.length > 0, modal.emptyStateText);
    const direct = await plugin.client!.search({ query, limit: plugin.settings.maxResults });
    assert.deepEqual(items.map((r) => [r.hit.path, r.hit.start_line]), direct.map((h) => [h.path, h.start_line]));
    assert.ok(items.slice(0, 3).some((r) => r.hit.path === 'engineering/Release process.md'));
    const first = els[0]!;
    assert.equal(first.find('mdsearch-hit-heading')?.textContent, items[0]!.headingPath);
    assert.equal(first.find('mdsearch-hit-note')?.textContent.startsWith(items[0]!.note), true);
    const withMark = els.find((e) => e.findAll('mark').length > 0);
    assert.ok(withMark, 'a snippet highlights a query word');
    assert.match(withMark.findAll('mark').map((m) => m.textContent).join(' '), /ship|version|customers|new/i);
    modal.close();
    assert.ok(!Modal.openModals.includes(modal));
  });

  test('typing fast sends one query, and every pending answer is the last query\'s', async () => {
    const modal = new SearchModal(app as never, plugin);
    const a = modal.getSuggestions('release');
    const b = modal.getSuggestions('release capt');
    const c = modal.getSuggestions('release captain rotation');
    const [ra, rb, rc] = await Promise.all([a, b, c]);
    assert.equal(modal.live.sent, 1);
    assert.deepEqual(ra, rc);
    assert.deepEqual(rb, rc);
    assert.ok(rc.length > 0);
  });

  test('filters typed as in the CLI narrow the modal\'s rows', async () => {
    const modal = new SearchModal(app as never, plugin);
    const { items } = await modal.type('path:finance/ money we spend');
    assert.ok(items.length > 0);
    assert.ok(items.every((r) => r.hit.path.startsWith('finance/')), items.map((r) => r.hit.path).join(', '));
  });

  test('a PDF hit opens at its page, another converted document at its top', async () => {
    vault.write('papers/bread.pdf', '%PDF-1.4 (stand-in bytes: only the path is opened)');
    vault.write('saved/page.html', '<p>stand-in</p>');
    const base = { uri: '', title: 'Page 3', breadcrumb: 'Page 3', start_line: 12, end_line: 20, score: 0.5, snippet: '', root: vault.root };
    await plugin.openHit({ ...base, path: 'papers/bread.pdf', format: 'pdf', page: 3 });
    assert.deepEqual(app.workspace.activeLeaf?.opened.at(-1), { path: 'papers/bread.pdf', eState: { subpath: '#page=3' } });
    await plugin.openHit({ ...base, path: 'saved/page.html', format: 'html' });
    assert.deepEqual(app.workspace.activeLeaf?.opened.at(-1), { path: 'saved/page.html', eState: {} });
    // The stand-ins go again: the last test checks that nothing else was written into the vault.
    for (const rel of ['papers/bread.pdf', 'papers', 'saved/page.html', 'saved']) {
      fs.rmSync(path.join(vault.root, rel), { recursive: true });
    }
  });

  test('choosing a row opens the note at its section; a modifier key opens a new tab', async () => {
    const modal = new SearchModal(app as never, plugin);
    const { items } = await modal.type('who decides go or no-go for a release');
    const row = items[0]!;
    modal.onChooseSuggestion(row, { ctrlKey: false, metaKey: false } as KeyboardEvent);
    await until('the note to open', 5000, () => app.workspace.activeLeaf?.opened.at(-1)?.path === row.hit.path);
    const leaf = app.workspace.activeLeaf!;
    assert.deepEqual(leaf.opened.at(-1)?.eState, { line: row.hit.start_line });
    const view = leaf.view as unknown as { editor: { getCursor(): { line: number } } };
    assert.equal(view.editor.getCursor().line, row.hit.start_line);
    assert.equal(app.workspace.getLeafCalls.at(-1), false);
    modal.onChooseSuggestion(row, { ctrlKey: true, metaKey: false } as KeyboardEvent);
    await until('a new tab', 5000, () => app.workspace.getLeafCalls.at(-1) === 'tab');
  });

  test('the related view follows the note and the section under the cursor', async () => {
    const note = await app.workspace.openNote('engineering/Release process.md');
    await plugin.showRelated();
    const leaf = app.workspace.getLeavesOfType(RELATED_VIEW)[0];
    assert.ok(leaf && leaf.view instanceof RelatedView);
    const view = leaf.view;
    await view.settled;
    await until('related hits', 10_000, async () => {
      await view.settled;
      return view.model.path === 'engineering/Release process.md' && view.model.hits.length > 0;
    });
    assert.ok(view.model.hits.every((h) => h.path !== 'engineering/Release process.md'));
    const items = el(view.contentEl).findAll('mdsearch-related-item');
    assert.equal(items.length, view.model.hits.length);
    assert.match(el(view.contentEl).find('mdsearch-related-title')?.textContent ?? '', /^engineering\/Release process$/, 'the cursor is in the front matter: no heading');

    // The cursor moves into "Database migrations": the view asks about that section.
    const text = note.editor.getValue();
    const line = text.split('\n').findIndex((l) => l === '## Database migrations');
    assert.ok(line > 0);
    note.editor.setCursor({ line: line + 2, ch: 0 });
    plugin.cursorMoved();
    await until('the view to follow the cursor', 10_000, async () => {
      await view.settled;
      return view.model.section === line && view.model.heading === 'Database migrations';
    });

    // A click on a row opens that note at its section.
    const hit = view.model.hits[0]!;
    el(view.contentEl).findAll('mdsearch-related-item')[0]!.click();
    await until('the related note to open', 5000, () => app.workspace.activeLeaf?.opened.at(-1)?.path === hit.path);
  });

  test('writing help: an unlinked mention is linked in one click, in the editor only', async () => {
    const rel = 'inbox/Plan.md';
    const onDisk = vault.read(rel);
    const note = await app.workspace.openNote(rel);
    await plugin.showRelated();
    const view = app.workspace.getLeavesOfType(RELATED_VIEW)[0]!.view as RelatedView;
    await until('the mention hint', 20_000, async () => {
      await view.settled;
      return view.model.path === rel && view.model.mentions.some((m) => m.path === 'engineering/Code review guidelines.md');
    });
    const help = el(view.contentEl).findAll('mdsearch-related-help');
    const row = help.find((h) => /Code review guidelines/.test(h.textContent));
    assert.ok(row, help.map((h) => h.textContent).join(' | '));
    const mention = view.model.mentions.find((m) => m.path === 'engineering/Code review guidelines.md')!;
    assert.equal(await view.applyMention(mention), true);
    assert.match(note.editor.getValue(), /\[\[Code review guidelines\]\]/);
    assert.equal(vault.read(rel), onDisk, 'the plugin never writes a note itself');
  });

  test('[[ suggestions come from the paragraph\'s meaning and replace the typed link', async () => {
    const rel = 'daily/2024-07-15.md';
    const note = await app.workspace.openNote(rel);
    const text = `${note.editor.getValue()}\nWe froze the code for the release on Thursday, see [[`;
    note.editor.setValue(text);
    const last = note.editor.lineCount() - 1;
    note.editor.setCursor({ line: last, ch: note.editor.getLine(last).length });
    const suggest = app.editorSuggests[0] as LinkSuggest;
    const items = await suggest.keystroke(note as never);
    assert.ok(items && items.length > 0);
    const pick = items.find((i) => i.label.startsWith('Release process'));
    assert.ok(pick, items.map((i) => i.label).join(', '));
    assert.ok(items.indexOf(pick) < 5);
    const rendered = new (await import('./stub/obsidian')).FakeEl();
    suggest.renderSuggestion(pick, rendered as never);
    assert.equal(rendered.find('mdsearch-link-label')?.textContent, pick.label);
    suggest.selectSuggestion(pick);
    const line = note.editor.getLine(last);
    assert.match(line, /see \[\[Release process[^\]]*\]\]$/);
    assert.equal(note.editor.getCursor().ch, line.length);
    // A closed link does not trigger; nor does anything with the setting off.
    assert.equal(await suggest.keystroke(note as never), null);
    note.editor.setValue(`${note.editor.getValue()}\n[[`);
    note.editor.setCursor({ line: note.editor.lineCount() - 1, ch: 2 });
    plugin.settings.linkSuggest = false;
    assert.equal(await suggest.keystroke(note as never), null);
    plugin.settings.linkSuggest = true;
    assert.ok(await suggest.keystroke(note as never));
  });

  test('a note saved on disk reaches the index through the vault event within a second', async () => {
    const rel = 'finance/Expense policy.md';
    vault.write(rel, `${vault.read(rel)}\n\n## Quokka allowance\n\nEvery zanzibarquokka receipt is reimbursed.\n`);
    const t0 = Date.now();
    app.vault.trigger('modify', new TFile(rel));
    const modal = new SearchModal(app as never, plugin);
    await until('the note in search', 1000, async () => (await modal.type('zanzibarquokka')).items.some((r) => r.hit.path === rel));
    assert.ok(Date.now() - t0 <= 1000);
  });

  test('create, rename and delete in the file explorer reach the index through the vault events', async () => {
    const modal = new SearchModal(app as never, plugin);
    const paths = async () => (await modal.type('platypuslantern')).items.map((r) => r.hit.path);
    vault.write('inbox/Idea.md', '# Idea\n\nA glowing platypuslantern for the office.\n');
    app.vault.trigger('create', new TFile('inbox/Idea.md'));
    await until('the new note', 5000, async () => (await paths()).includes('inbox/Idea.md'));
    fs.renameSync(path.join(vault.root, 'inbox', 'Idea.md'), path.join(vault.root, 'inbox', 'Lantern.md'));
    app.vault.trigger('rename', new TFile('inbox/Lantern.md'), 'inbox/Idea.md');
    await until('the renamed note', 5000, async () => {
      const now = await paths();
      return now.includes('inbox/Lantern.md') && !now.includes('inbox/Idea.md');
    });
    fs.rmSync(path.join(vault.root, 'inbox', 'Lantern.md'));
    app.vault.trigger('delete', new TFile('inbox/Lantern.md'));
    await until('the deleted note gone', 5000, async () => !(await paths()).includes('inbox/Lantern.md'));
  });

  test('settings: data.json holds the synced settings, the executable stays on this device', async () => {
    const tab = app.settingTabs[0] as MdsearchSettingTab;
    // Obsidian 1.13+ draws the declared rows itself; older versions call display(): the same rows.
    tab.renderDefinitions();
    const declared = el(tab.containerEl).settings.map((s) => [s.name, s.desc]);
    tab.display();
    assert.deepEqual(el(tab.containerEl).settings.map((s) => [s.name, s.desc]), declared);
    const names = el(tab.containerEl).settings.map((s) => s.name);
    assert.deepEqual(names, ['Path to mdsearch', 'Install mdsearch', 'Embedder backend', 'Include', 'Exclude', 'Results per search', 'Link suggestions by meaning', 'Index']);
    assert.match(Setting.named(tab.containerEl, 'Exclude').desc, /on top of \.obsidian\/, \.trash\//);
    const results = Setting.named(tab.containerEl, 'Results per search').components[0] as unknown as { change(v: string): Promise<void> };
    await results.change('7');
    await results.change('not a number');
    assert.equal(plugin.settings.maxResults, 7);
    const saved = JSON.parse(plugin.dataJson ?? '{}') as Record<string, unknown>;
    assert.equal(saved.maxResults, 7);
    assert.ok(!JSON.stringify(saved).includes(mdsearchExecutable()), 'no device path in data.json');
    assert.equal(app.loadLocalStorage(EXECUTABLE_KEY), mdsearchExecutable());
    const modal = new SearchModal(app as never, plugin);
    const { items } = await modal.type('release');
    assert.ok(items.length > 0 && items.length <= 7, String(items.length));
    assert.match(Setting.named(tab.containerEl, 'Index').desc, new RegExp(`^${vault.cache.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    const answer = await tab.test();
    assert.match(answer, /^mdsearch \d\S*, model loaded, at .*mdsearch \(from this setting\)$/);
    assert.equal(el(Setting.named(tab.containerEl, 'Path to mdsearch').descEl).find('mdsearch-test-result')?.textContent, answer);
  });

  test('Rebuild index re-indexes from the notes and comes back ready', async () => {
    const before = Notice.shown.length;
    const seen: string[] = [];
    const off = plugin.on('status', () => seen.push(plugin.serverStatus?.state ?? ''));
    try {
      app.commands.get('rebuild-index')?.callback?.();
      await until('the notice', 5000, () => Notice.shown.slice(before).some((n) => /Rebuilding the mdsearch index/.test(n)));
      await until('indexing, then ready again', READY_MS, () =>
        seen.includes('indexing') && seen.at(-1) === 'ready' && /sections$/.test(plugin.statusView.text));
    } finally {
      off();
    }
  });

  test('nothing was written into the vault', () => {
    assert.deepEqual(listFiles(vault.root), vaultBefore);
  });

  test('unload stops the server process', async () => {
    const pid = plugin.client?.pid;
    assert.ok(pid);
    plugin.unload();
    await until('the process to exit', 10_000, () => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    });
  });
});

describe('the plugin without a server', () => {
  test('settings from an older or hand-edited data.json load with defaults for what does not fit', async () => {
    const { plugin } = makePlugin(PLUGIN_DIR_FOR_SETTINGS, '', {});
    plugin.dataJson = JSON.stringify({ maxResults: 5000, backend: 'gpu', include: ['notes/**', 3], linkSuggest: 'yes' });
    await plugin.loadSettings();
    assert.deepEqual(plugin.settings, { backend: 'onnx', include: ['notes/**'], exclude: [], maxResults: 20, linkSuggest: true });
    assert.equal(plugin.executable, '');
  });

  test('a missing executable: one notice saying how to install, the status bar says error, no retry loop', async () => {
    const dir = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'mdsearch-novault-'));
    try {
      const { app, plugin } = makePlugin(dir, '/nonexistent/bin/mdsearch', { MDSEARCH_CACHE_DIR: dir });
      const before = Notice.shown.length;
      await plugin.load();
      app.workspace.fireLayoutReady();
      await until('the failure', 10_000, () => plugin.supervisor.state.kind === 'failed');
      const shown = Notice.shown.slice(before);
      assert.equal(shown.length, 1, shown.join('\n'));
      assert.match(shown[0]!, /\/nonexistent\/bin\/mdsearch.*does not exist.*Install button in Settings/s);
      assert.equal(plugin.supervisor.attempts, 0);
      const bar = app.statusBar.find('mdsearch-status')!;
      assert.equal(bar.textContent, 'mdsearch: error');
      assert.ok(bar.hasClass('mdsearch-error'));
      const modal = new SearchModal(app as never, plugin);
      const { items } = await modal.type('anything');
      assert.deepEqual(items, []);
      assert.match(modal.emptyStateText, /mdsearch: error: .*does not exist/);
      plugin.unload();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
  test('nothing found and no setting: one notice with an Install button, which opens the install dialog', async () => {
    // A device with no mdsearch anywhere: a home, PATH and login shell of its own.
    const home = fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'mdsearch-nohome-'));
    const saved = { ...process.env };
    Object.assign(process.env, { HOME: home, PATH: home, SHELL: '/bin/sh', XDG_DATA_HOME: path.join(home, 'data') });
    for (const v of ['PIPX_BIN_DIR', 'UV_TOOL_BIN_DIR', 'XDG_BIN_HOME']) delete process.env[v];
    try {
      const { app, plugin } = makePlugin(home, '', { MDSEARCH_CACHE_DIR: home });
      const before = Notice.shown.length;
      const offered = Notice.fragments.length;
      await plugin.load();
      app.workspace.fireLayoutReady();
      await until('the failure', 20_000, () => plugin.supervisor.state.kind === 'failed');
      assert.deepEqual(Notice.shown.slice(before).length, 1);
      assert.match(Notice.shown.at(-1) ?? '', /mdsearch was not found on this device .*Install mdsearch$/s);
      const button = Notice.fragments.slice(offered)[0]?.find('button');
      assert.equal(button?.textContent, 'Install mdsearch');
      button?.click();
      const modal = Modal.openModals.at(-1);
      assert.ok(modal instanceof InstallModal);
      assert.equal(modal.titleEl.textContent, 'Install mdsearch');
      assert.ok(modal.contentEl.textContent.includes(`into a private environment at ${privateEnvDir()}`), modal.contentEl.textContent);
      assert.equal(privateEnvDir(), path.join(home, 'data', 'mdsearch', 'obsidian-env'));
      assert.deepEqual(modal.contentEl.findAll('button').map((b) => b.textContent), ['Install', 'Cancel']);
      modal.contentEl.findAll('button')[1]?.click();
      assert.ok(!Modal.openModals.includes(modal), 'Cancel closes it, nothing installed');
      assert.ok(!fs.existsSync(privateEnvDir()));
      plugin.unload();
    } finally {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
      fs.rmSync(home, { recursive: true, force: true });
    }
  });
});
