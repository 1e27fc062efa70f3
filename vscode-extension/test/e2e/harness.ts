// Runs code-server with a fresh profile and drives its workbench through playwright-core. Only
// loopback addresses are used; Chromium is Debian's (never a downloaded build).
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { type Browser, chromium, type Locator, type Page } from 'playwright-core';

const run = promisify(execFile);

export const EXTENSION_ROOT = path.resolve(__dirname, '../../..');
export const RESULTS_DIR = path.join(EXTENSION_ROOT, 'test-results');

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export function log(message: string): void {
  process.stderr.write(`[e2e ${new Date().toISOString().slice(11, 23)}] ${message}\n`);
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

function httpOk(url: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get(url, (res) => {
      res.resume();
      resolve((res.statusCode ?? 500) < 500);
    });
    req.on('error', () => resolve(false));
    req.setTimeout(2000, () => req.destroy());
  });
}

export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false>,
  timeoutMs: number,
  intervalMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${lastError instanceof Error ? lastError.message : JSON.stringify(lastError)}` : ''}`);
}

export interface CodeServer {
  url: string;
  process: ChildProcess;
  userDataDir: string;
  stop(): Promise<void>;
}

export interface CodeServerOptions {
  bin: string;
  userDataDir: string;
  extensionsDir: string;
  settings: Record<string, unknown>;
  logFile: string;
  /** code-server's environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
}

function profileArgs(o: CodeServerOptions): string[] {
  return ['--user-data-dir', o.userDataDir, '--extensions-dir', o.extensionsDir];
}

export async function installExtension(o: CodeServerOptions, vsix: string): Promise<void> {
  const { stdout, stderr } = await run(o.bin, [...profileArgs(o), '--install-extension', vsix, '--force'], {
    timeout: 120_000,
    env: o.env ?? process.env,
  });
  log(`install-extension: ${(stdout + stderr).trim().split('\n').slice(-1)[0] ?? ''}`);
}

export async function startCodeServer(o: CodeServerOptions): Promise<CodeServer> {
  fs.mkdirSync(path.join(o.userDataDir, 'User'), { recursive: true });
  fs.writeFileSync(path.join(o.userDataDir, 'User', 'settings.json'), JSON.stringify(o.settings, null, 2));
  const port = await freePort();
  const out = fs.openSync(o.logFile, 'a');
  const child = spawn(
    o.bin,
    [
      ...profileArgs(o),
      '--bind-addr', `127.0.0.1:${port}`,
      '--auth', 'none',
      '--disable-telemetry',
      '--disable-update-check',
      '--disable-workspace-trust',
      '--disable-getting-started-override',
    ],
    { stdio: ['ignore', out, out], detached: true, env: o.env ?? process.env },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitFor('code-server to listen', () => httpOk(`${url}/healthz`), 60_000);
  log(`code-server on ${url} (pid ${child.pid})`);
  return {
    url,
    process: child,
    userDataDir: o.userDataDir,
    stop: async () => {
      if (child.exitCode !== null || child.pid === undefined) return;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      // Its own process group: the extension host and the Python server go with it.
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {
        return;
      }
      const timer = setTimeout(() => {
        try {
          process.kill(-(child.pid ?? 0), 'SIGKILL');
        } catch {
          /* gone */
        }
      }, 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: CHROMIUM_ARGS });
}

/** The VS Code workbench in a page, with helpers that act like a user at the keyboard. */
export class Workbench {
  constructor(readonly page: Page) {}

  get quickInput(): Locator {
    return this.page.locator('.quick-input-widget');
  }

  get quickInputBox(): Locator {
    return this.quickInput.locator('.quick-input-box input');
  }

  quickRows(hasText?: string | RegExp): Locator {
    const rows = this.quickInput.locator('.quick-input-list .monaco-list-row');
    return hasText === undefined ? rows : rows.filter({ hasText });
  }

  async waitReady(): Promise<void> {
    await this.page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
    await this.page.locator('.statusbar').waitFor({ timeout: 60_000 });
    // the explorer lists the vault once the workspace folder is open
    await this.page.locator('.explorer-folders-view .monaco-list-row').first().waitFor({ timeout: 60_000 });
  }

  /** Runs a palette interaction again when it fails: the workbench closes a quick input that
   * loses focus (an editor shown just then, a notification), and a test should not fail on that
   * race, only on the extension's behaviour. Each try starts from a closed quick input. */
  async retry<T>(what: string, fn: () => Promise<T>, tries = 3): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (error) {
        if (attempt >= tries) throw error;
        log(`${what}: try ${attempt} failed (${error instanceof Error ? error.message.split('\n')[0] : String(error)}), again`);
        await this.closeQuickInput();
      }
    }
  }

  /** F1 is the one palette shortcut the browser never takes for itself. */
  async openPalette(prefix: '>' | '' = '>'): Promise<void> {
    await this.retry('open the palette', async () => {
      await this.closeQuickInput();
      await this.page.keyboard.press('F1');
      await this.quickInputBox.waitFor({ state: 'visible', timeout: 5000 });
      if (prefix === '') {
        await this.quickInputBox.fill('', { timeout: 5000 });
      }
    });
  }

  async closeQuickInput(): Promise<void> {
    if (await this.quickInput.isVisible()) {
      await this.page.keyboard.press('Escape');
      await this.quickInput.waitFor({ state: 'hidden', timeout: 5000 }).catch(() => undefined);
    }
  }

  async runCommand(title: string): Promise<void> {
    await this.retry(`run "${title}"`, async () => {
      await this.openPalette('>');
      await this.quickInputBox.fill(`>${title}`, { timeout: 5000 });
      await this.quickRows(title).first().waitFor({ timeout: 10_000 });
      await this.focusRow(title);
      await this.page.keyboard.press('Enter');
    });
  }

  /** Moves the list focus with the arrow keys until the focused row contains `text`. */
  async focusRow(text: string | RegExp, maxSteps = 25): Promise<void> {
    for (let i = 0; i < maxSteps; i++) {
      const focused = this.quickInput.locator('.quick-input-list .monaco-list-row.focused');
      const label = (await focused.count()) > 0 ? await focused.first().innerText() : '';
      if (typeof text === 'string' ? label.includes(text) : text.test(label)) return;
      await this.page.keyboard.press('ArrowDown');
    }
    throw new Error(`no row matching ${String(text)} in the quick pick`);
  }

  /** Quick Open (file by name), as Ctrl+P would, through F1 without the ">" prefix. */
  async openFile(relPath: string): Promise<void> {
    const name = path.basename(relPath);
    await this.retry(`open ${relPath}`, async () => {
      await this.openPalette('');
      await this.quickInputBox.fill(relPath, { timeout: 5000 });
      await this.quickRows(name).first().waitFor({ timeout: 10_000 });
      await this.focusRow(name);
      await this.page.keyboard.press('Enter');
    });
    await this.activeTab(name);
  }

  async activeTab(name: string): Promise<void> {
    await this.page
      .locator('.tabs-container .tab.active', { hasText: name })
      .waitFor({ timeout: 15_000 });
    await this.page.locator('.editor-instance .monaco-editor .view-lines').first().waitFor();
  }

  /** "Ln 12, Col 1 (210 selected)" from the status bar. */
  async cursorStatus(): Promise<string> {
    return (await this.page.locator('[id="status.editor.selection"]').innerText()).trim();
  }

  /** The mdsearch status bar item's text (the codicon is an element, not text). */
  async mdsearchStatus(): Promise<string> {
    const item = this.page.locator('.statusbar-item', { hasText: /mdsearch:|\bsections?\b/ });
    return (await item.count()) > 0 ? (await item.first().innerText()).trim() : '';
  }

  async screenshot(name: string): Promise<string> {
    fs.mkdirSync(RESULTS_DIR, { recursive: true });
    const file = path.join(RESULTS_DIR, name);
    await this.page.screenshot({ path: file });
    log(`screenshot ${file}`);
    return file;
  }
}

export interface Session {
  tmp: string;
  /** The profile's folder: globalStorage/<extension id>/ is under its User/. */
  userDataDir: string;
  vault: string;
  server: CodeServer;
  browser: Browser;
  wb: Workbench;
  close(): Promise<void>;
}

export interface SessionOptions {
  codeServer: string;
  vsix: string;
  /** Folder copied to `<tmp>/vault` and opened. */
  fixture: string;
  /** User settings on top of the quiet defaults below. */
  settings: Record<string, unknown>;
  /** Prefix for log files in test-results/. */
  name: string;
  /** code-server's environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
  timed?: <T>(step: string, fn: () => Promise<T>) => Promise<T>;
}

/** Settings that keep a fresh profile quiet: no trust prompt, welcome page, tips or updates. */
export const QUIET_SETTINGS: Record<string, unknown> = {
  'security.workspace.trust.enabled': false,
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'workbench.enableExperiments': false,
  'telemetry.telemetryLevel': 'off',
  'update.mode': 'none',
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'extensions.ignoreRecommendations': true,
  'git.enabled': false,
  'files.autoSave': 'off',
  'editor.hover.delay': 300,
  'editor.minimap.enabled': false,
  'window.commandCenter': false,
};

/** Fresh profile, the .vsix installed, code-server started, the vault open in Chromium. */
export async function openSession(o: SessionOptions): Promise<Session> {
  const timed = o.timed ?? (<T>(_step: string, fn: () => Promise<T>) => fn());
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), `mdsearch-e2e-${o.name}-`));
  const vault = path.join(tmp, 'vault');
  fs.cpSync(o.fixture, vault, { recursive: true });
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const options: CodeServerOptions = {
    bin: o.codeServer,
    userDataDir: path.join(tmp, 'user-data'),
    extensionsDir: path.join(tmp, 'extensions'),
    logFile: path.join(RESULTS_DIR, `${o.name}-code-server.log`),
    settings: { ...QUIET_SETTINGS, ...o.settings },
    env: o.env,
  };
  await timed('install-extension', () => installExtension(options, o.vsix));
  const server = await timed('start-code-server', () => startCodeServer(options));
  const browser = await launchBrowser();
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.on('pageerror', (e) => log(`page error: ${e.message}`));
  const wb = new Workbench(page);
  await timed('open-workbench', async () => {
    await page.goto(`${server.url}/?folder=${encodeURIComponent(vault)}`);
    await wb.waitReady();
  });
  return {
    tmp,
    userDataDir: options.userDataDir,
    vault,
    server,
    browser,
    wb,
    close: async () => {
      await wb.screenshot(`${o.name}-final.png`).catch(() => undefined);
      await browser.close().catch(() => undefined);
      await server.stop().catch(() => undefined);
      // The extension's log (interpreter, server stderr, LSP trace) is the first thing to read
      // when a test fails.
      const logs = path.join(options.userDataDir, 'logs');
      if (fs.existsSync(logs)) fs.cpSync(logs, path.join(RESULTS_DIR, `${o.name}-vscode-logs`), { recursive: true });
      fs.rmSync(tmp, { recursive: true, force: true });
    },
  };
}
