// The plugin's client half (no `obsidian` import) against the real `mdsearch serve` on a copy of
// the examples vault: the supervisor starts it, search/related/completion go through the LSP
// client, vault events go through VaultSync exactly as the plugin's event handlers send them.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { commandFor, ExecutableNotFoundError, locateServer, checkVersion } from '../src/client/locate';
import type { StatusParams } from '../src/client/protocol';
import { DEFAULT_SETTINGS, toServerSettings } from '../src/client/settings';
import { renderStatus } from '../src/client/status';
import { ServerSupervisor, type ServerState } from '../src/client/supervisor';
import { VaultSync } from '../src/client/sync';
import { listFiles, mdsearchExecutable, type TempVault, tempVault, until } from './helpers';

const READY_MS = 120_000;

describe('client half against the real server', () => {
  let vault: TempVault;
  let supervisor: ServerSupervisor;
  let sync: VaultSync;
  let status: StatusParams | undefined;
  const states: ServerState[] = [];
  const notices: string[] = [];
  let vaultBefore: string[];

  before(async () => {
    vault = tempVault();
    vaultBefore = listFiles(vault.root);
    const exe = mdsearchExecutable();
    supervisor = new ServerSupervisor({
      locate: () => locateServer({ setting: exe }),
      client: {
        root: vault.root,
        env: vault.env,
        settings: () => toServerSettings(DEFAULT_SETTINGS),
        onStatus: (s) => {
          status = s;
        },
      },
      backoff: { initialMs: 50 },
      onState: (s) => states.push(s),
      onNotice: (m) => notices.push(m),
      onClient: () => sync.reattach(),
    });
    sync = new VaultSync(vault.root, () => supervisor.client);
    await supervisor.start();
    assert.equal(supervisor.state.kind, 'running', JSON.stringify(supervisor.state));
    await until('the index to be ready', READY_MS, () => status?.state === 'ready' && (status.folders[0]?.chunks ?? 0) > 0);
  });

  after(async () => {
    await supervisor?.stop();
    vault?.cleanup();
  });

  test('status: ready with the section count, the index outside the vault', () => {
    assert.ok(status);
    const folder = status.folders[0];
    assert.ok(folder && folder.files >= 20, `files: ${folder?.files}`);
    assert.ok((folder.index_dir ?? '').startsWith(vault.cache), `index at ${folder.index_dir}`);
    const view = renderStatus(supervisor.state, status);
    assert.match(view.text, /^mdsearch: \d[\d,]* sections$/);
    assert.equal(view.text, `mdsearch: ${folder.chunks.toLocaleString('en-US')} sections`);
  });

  test('search by meaning finds the release note', async () => {
    const client = supervisor.client;
    assert.ok(client);
    const hits = await client.search({ query: 'how do we ship a new version to customers', limit: 5 });
    assert.ok(hits.length > 0);
    assert.ok(hits.slice(0, 3).some((h) => h.path === 'engineering/Release process.md'), hits.map((h) => h.path).join(', '));
    const top = hits[0];
    assert.ok(top && top.breadcrumb.length > 0 && top.snippet.length > 0 && typeof top.start_line === 'number');
  });

  test('filters typed as in the CLI are passed through (path:)', async () => {
    const hits = await supervisor.client!.search({ query: 'path:finance/ money we spend', limit: 10 });
    assert.ok(hits.length > 0);
    assert.ok(hits.every((h) => h.path.startsWith('finance/')), hits.map((h) => h.path).join(', '));
  });

  test('related sections of a note come from other notes', async () => {
    const uri = sync.uri('engineering/Release process.md');
    const hits = await supervisor.client!.related({ uri, line: 10, limit: 5 });
    assert.ok(hits.length > 0);
    assert.ok(hits.every((h) => h.path !== 'engineering/Release process.md'));
    assert.ok(hits.every((h) => typeof h.score === 'number'));
  });

  test('[[ completion from the open buffer', async () => {
    const rel = 'daily/2024-07-15.md';
    const text = `${vault.read(rel)}\nWe froze the code for the release on Thursday, see [[`;
    sync.open(rel, text);
    const lines = text.split('\n');
    const line = lines.length - 1;
    const character = (lines[line] ?? '').length;
    const items = await supervisor.client!.completion(sync.uri(rel), line, character);
    assert.ok(items.length > 0);
    assert.ok(items.slice(0, 5).some((i) => i.label.startsWith('Release process')), items.map((i) => i.label).join(', '));
    const first = items[0]!;
    assert.equal(first.edit.range.start.line, line);
    assert.equal(first.edit.range.start.character, character - 2, 'the edit replaces from [[');
    assert.match(first.edit.newText, /^\[\[.+\]\]$/);
    sync.open(undefined, '');
  });

  test('a note modified through the event handler is found within a second', async () => {
    const rel = 'finance/Expense policy.md';
    vault.write(rel, `${vault.read(rel)}\n\n## Quokka allowance\n\nEvery zanzibarquokka receipt is reimbursed.\n`);
    const t0 = Date.now();
    sync.modify(rel);
    const hits = await until('the modified note in search', 1000, async () => {
      const found = await supervisor.client!.search({ query: 'zanzibarquokka', limit: 3 });
      return found.find((h) => h.path === rel);
    });
    assert.match(hits.snippet + hits.breadcrumb, /quokka/i);
    assert.ok(Date.now() - t0 <= 1000);
  });

  test('the open note saved (didChange + didSave) is found within a second', async () => {
    const rel = 'people/Hiring process.md';
    const text = `${vault.read(rel)}\n\n## Interview snacks\n\nCandidates get a marzipanwombat biscuit.\n`;
    sync.open(rel, vault.read(rel));
    vault.write(rel, text);
    const t0 = Date.now();
    sync.modify(rel, text);
    await until('the saved note in search', 1000, async () =>
      (await supervisor.client!.search({ query: 'marzipanwombat', limit: 3 })).find((h) => h.path === rel));
    assert.ok(Date.now() - t0 <= 1000);
    sync.open(undefined, '');
  });

  test('create, rename and delete reach the index', async () => {
    vault.write('inbox/Idea.md', '# Idea\n\nA glowing platypuslantern for the office.\n');
    sync.create('inbox', true);
    sync.create('inbox/Idea.md');
    await until('the new note', 5000, async () =>
      (await supervisor.client!.search({ query: 'platypuslantern', limit: 3 })).some((h) => h.path === 'inbox/Idea.md'));
    fs.renameSync(path.join(vault.root, 'inbox', 'Idea.md'), path.join(vault.root, 'inbox', 'Lantern.md'));
    sync.rename('inbox/Lantern.md', 'inbox/Idea.md');
    await until('the renamed note', 5000, async () => {
      const paths = (await supervisor.client!.search({ query: 'platypuslantern', limit: 3 })).map((h) => h.path);
      return paths.includes('inbox/Lantern.md') && !paths.includes('inbox/Idea.md');
    });
    fs.rmSync(path.join(vault.root, 'inbox', 'Lantern.md'));
    sync.delete('inbox/Lantern.md');
    await until('the deleted note gone', 5000, async () =>
      !(await supervisor.client!.search({ query: 'platypuslantern', limit: 3 })).some((h) => h.path.startsWith('inbox/')));
  });

  test('a killed server is restarted by the backoff logic and answers again', async () => {
    const first = supervisor.client;
    assert.ok(first);
    const pid = first.pid;
    const attempts = supervisor.attempts;
    first.kill();
    await until('a restart to be scheduled', 5000, () => states.some((s) => s.kind === 'restarting'));
    await until('the new server', READY_MS, () => supervisor.state.kind === 'running' && supervisor.client?.pid !== pid);
    assert.equal(supervisor.attempts, attempts + 1);
    const hits = await until('search on the new server', READY_MS, async () => {
      const found = await supervisor.client!.search({ query: 'zanzibarquokka', limit: 3 });
      return found.length ? found : undefined;
    });
    assert.equal(hits[0]?.path, 'finance/Expense policy.md');
    assert.deepEqual(notices, [], 'one crash is no reason for a notice');
  });

  test('nothing was written into the vault', () => {
    const now = listFiles(vault.root).filter((f) => !f.startsWith('inbox'));
    assert.deepEqual(now, vaultBefore);
  });
});

describe('finding the executable', () => {
  test('a missing executable setting is reported clearly and not retried', async () => {
    const notices: string[] = [];
    const supervisor = new ServerSupervisor({
      locate: () => locateServer({ setting: '/nonexistent/bin/mdsearch' }),
      client: { root: os.tmpdir(), settings: () => ({}) },
      backoff: { initialMs: 10 },
      onNotice: (m) => notices.push(m),
    });
    await supervisor.start();
    assert.equal(supervisor.state.kind, 'failed');
    assert.equal(supervisor.attempts, 0);
    assert.equal(notices.length, 1);
    assert.match(notices[0]!, /\/nonexistent\/bin\/mdsearch.*does not exist/);
    assert.match(notices[0]!, /Install button in Settings/);
    await supervisor.start(); // asked again (e.g. the layout event fires twice): still one notice
    assert.equal(notices.length, 1);
  });

  test('an executable that vanished between lookup and spawn is a clear error, not a loop', async () => {
    const supervisor = new ServerSupervisor({
      locate: async () => commandFor('/nonexistent/bin/mdsearch', 'setting'),
      client: { root: os.tmpdir(), settings: () => ({}) },
      backoff: { initialMs: 10 },
    });
    await supervisor.start();
    assert.equal(supervisor.state.kind, 'failed');
    assert.match(supervisor.state.kind === 'failed' ? supervisor.state.message : '', /cannot run \/nonexistent\/bin\/mdsearch \(no such file\)/);
    assert.equal(supervisor.attempts, 1);
  });

  test('an empty setting finds mdsearch through the login shell', async () => {
    const exe = mdsearchExecutable();
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'mdsearch-home-'));
    try {
      // The app's own PATH lacks it (a GUI app's minimal PATH); the login shell's profile adds it.
      fs.writeFileSync(path.join(home, '.profile'), `export PATH="${path.dirname(exe)}:$PATH"\n`);
      const env = { HOME: home, SHELL: '/bin/sh', PATH: '/usr/bin:/bin' };
      const found = await locateServer({ setting: '', system: { platform: process.platform, env, home } });
      assert.equal(found.command, exe);
      assert.equal(found.source, 'login-shell');
      assert.deepEqual(found.args, ['serve']);
      const version = await checkVersion(found);
      assert.ok(version.ok && /^mdsearch \d/.test(version.version), JSON.stringify(version));
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  test('not found anywhere: the error says where it looked and how to install', async () => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), 'mdsearch-home-'));
    try {
      await assert.rejects(
        locateServer({ setting: '', system: { platform: process.platform, env: { HOME: home, SHELL: '/bin/sh', PATH: home }, home }, shellLookup: async () => undefined }),
        (e: unknown) => e instanceof ExecutableNotFoundError && /login shell \/bin\/sh/.test(e.message) && /Install button in Settings/.test(e.message),
      );
    } finally {
      fs.rmSync(home, { recursive: true, force: true });
    }
  });

  test('the Test button reports the exact error of a broken executable', async () => {
    const result = await checkVersion(commandFor('/bin/false', 'setting'));
    assert.deepEqual(result.ok, false);
    assert.match(result.ok ? '' : result.error, /\/bin\/false --version failed/);
  });

  test('a server that keeps dying is retried with backoff, then given up with one notice', async () => {
    const notices: string[] = [];
    const states: ServerState[] = [];
    const supervisor = new ServerSupervisor({
      // `false serve` exits at once: a crash at every start.
      locate: async () => commandFor('/bin/false', 'setting'),
      client: { root: os.tmpdir(), settings: () => ({}) },
      backoff: { initialMs: 10, noticeAfter: 2, giveUpAfter: 4 },
      onNotice: (m) => notices.push(m),
      onState: (s) => states.push(s),
    });
    await supervisor.start();
    await until('giving up', 10_000, () => supervisor.state.kind === 'failed');
    assert.equal(supervisor.attempts, 4);
    const delays = states.filter((s) => s.kind === 'restarting').map((s) => (s.kind === 'restarting' ? s.inMs : 0));
    assert.deepEqual(delays, [10, 20, 40]);
    assert.equal(notices.length, 2, notices.join('\n'));
    assert.match(notices[0]!, /keeps failing/);
    assert.match(notices[1]!, /failed 4 times in a row and is not restarted again/);
    await supervisor.stop();
  });
});
