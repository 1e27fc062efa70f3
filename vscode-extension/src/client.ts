// Owns the language client: finds the mdsearch program (discovery.ts), offers to install it when
// there is none (install.ts), starts `mdsearch serve`, restarts it, and routes its status events.
// Lifecycle operations are queued so a restart never overlaps a start, a stop or an install.
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';
import {
  type ConfigurationParams,
  ExecuteCommandRequest,
  type LanguageClientOptions,
  LanguageClient,
  ResponseError,
  RevealOutputChannelOn,
  type ServerOptions,
  State,
} from 'vscode-languageclient/node';
import { debounce, type Debounced } from './debounce';
import { findProgram, findServer, type Found, type Host } from './discovery';
import { findPython, installSteps, runQuiet, runSteps, toolInstallCommand } from './install';
import { parseStatus, StatusNotification, toRelatedPick } from './protocol';
import { onPythonInterpreterChange, PYTHON_EXTENSION_ID, pythonExtensionInterpreter } from './python';
import {
  type PathContext,
  type ServerSettings,
  serverPathSetting,
  type SettingSchema,
  toServerSettings,
} from './settings';
import { type ClientStatus } from './status';

/** The package on PyPI that holds the `mdsearch` program. */
export const PIP_PACKAGE = 'mdsearch-ls';
export const INSTALL_COMMAND = 'mdsearch.installServer';

/** Restart delay after a settings change: typing in the settings editor fires one event per key. */
const RESTART_DEBOUNCE_MS = 750;

/** This machine, for discovery. */
export const localHost: Host = {
  platform: process.platform,
  env: process.env,
  home: os.homedir(),
  isExecutable: async (file) => {
    try {
      if (!(await fs.promises.stat(file)).isFile()) return false;
      if (process.platform !== 'win32') await fs.promises.access(file, fs.constants.X_OK);
      return true;
    } catch {
      return false;
    }
  },
};

/** `<program> --version`: "mdsearch 0.1.0" from mdsearch, anything else from anything else. */
function version(program: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(program, ['--version'], { timeout: 30_000, windowsHide: true }, (error, stdout) => {
      const text = stdout.trim();
      resolve(!error && /^mdsearch\s/.test(text) ? text : undefined);
    });
  });
}

export class ServerManager implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private clientDisposables: vscode.Disposable[] = [];
  private lifecycle: Promise<void> = Promise.resolve();
  private stopping = false;
  private offered = false;
  private statusNotifications = 0;
  private program: Found | undefined;
  private readonly statusEmitter = new vscode.EventEmitter<ClientStatus>();
  private readonly programEmitter = new vscode.EventEmitter<void>();
  private readonly disposables: vscode.Disposable[] = [this.statusEmitter, this.programEmitter];
  /** Fires for every client-side state change and every `mdsearch/status` the server sends. */
  readonly onStatus = this.statusEmitter.event;
  /** Fires when the program found changes (the MCP definition follows it). */
  readonly onProgram = this.programEmitter.event;
  readonly scheduleRestart: Debounced<[]>;

  constructor(
    private readonly output: vscode.LogOutputChannel,
    private readonly schema: Record<string, SettingSchema>,
    /** The extension's own environment, in its global storage. */
    private readonly envDir: string,
  ) {
    this.scheduleRestart = debounce(() => void this.restart(), RESTART_DEBOUNCE_MS);
    const pythonExtension = vscode.extensions.getExtension(PYTHON_EXTENSION_ID);
    // Follow the Python extension's interpreter only when that is where mdsearch was found.
    void onPythonInterpreterChange(pythonExtension, () => {
      if (this.program?.source === 'Python extension') {
        this.output.info('Python extension changed the interpreter; restarting the server.');
        this.scheduleRestart();
      }
    }).then(
      (d) => d && this.disposables.push(d),
      (e: unknown) => this.output.warn(`Python extension API unavailable: ${String(e)}`),
    );
  }

  /** The mdsearch program in use, once found. */
  get programPath(): string | undefined {
    return this.program?.path;
  }

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop());
  }

  restart(): Promise<void> {
    this.scheduleRestart.cancel();
    return this.enqueue(async () => {
      this.output.info('Restarting the server.');
      await this.doStop();
      await this.doStart();
    });
  }

  /** Sends `workspace/executeCommand` straight to the server (not through VS Code's command
   * registry) so the request can be cancelled with `token` when the user types on. */
  async execute(command: string, args: unknown[], token?: vscode.CancellationToken): Promise<unknown> {
    // A command run where mdsearch is not on (no vault, no setting) starts it for this window.
    if (!this.client) await this.start();
    const client = this.client;
    if (!client || client.state !== State.Running) {
      throw new Error(this.program
        ? 'the mdsearch server is not running (see "Markdown Search: Show Logs")'
        : 'mdsearch is not installed (run "Markdown Search: Install mdsearch")');
    }
    return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args }, token);
  }

  private enqueue(op: () => Promise<void>): Promise<void> {
    const next = this.lifecycle.then(op, op);
    this.lifecycle = next.catch((e: unknown) => this.output.error(`Server lifecycle: ${String(e)}`));
    return next;
  }

  private emit(status: ClientStatus): void {
    this.statusEmitter.fire(status);
  }

  private async doStart(): Promise<void> {
    if (this.client) return;
    this.emit({ kind: 'starting' });
    const program = await this.locate();
    if (!program) {
      const message = 'mdsearch: the mdsearch program is not installed.';
      this.emit({ kind: 'failed', message });
      void this.offerInstall();
      return;
    }
    const serverOptions: ServerOptions = {
      command: program.path,
      args: ['serve'],
      options: { cwd: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath, env: { ...process.env, PYTHONUNBUFFERED: '1' } },
    };
    const clientOptions: LanguageClientOptions = {
      // Only files on disk: the server indexes the file system, untitled buffers have no path.
      documentSelector: [{ scheme: 'file', language: 'markdown' }],
      // No `synchronize`: the server registers its own file watchers (notes and .gitignore) and
      // workspace/didChangeConfiguration for the `mdsearch` section, then pulls each folder's
      // values, as it does with any LSP editor.
      initializationOptions: settingsForScope(undefined, this.schema),
      outputChannel: this.output,
      traceOutputChannel: this.output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      middleware: {
        // The server's lenses and hints name its `mdsearch.related` command, which only returns
        // the list; in VS Code they open the related QuickPick instead.
        resolveCodeLens: async (lens, token, next) => {
          const resolved = await next(lens, token);
          if (resolved?.command) resolved.command = toRelatedPick(resolved.command);
          return resolved;
        },
        provideInlayHints: async (document, range, token, next) => {
          const hints = await next(document, range, token);
          for (const hint of hints ?? []) {
            if (typeof hint.label === 'string') continue;
            for (const part of hint.label) if (part.command) part.command = toRelatedPick(part.command);
          }
          return hints;
        },
        workspace: {
          // The server pulls section "mdsearch"; answer with the same normalised object as
          // initializationOptions instead of the raw settings (which hold "" for unset values).
          configuration: async (params: ConfigurationParams, token, next) => {
            const raw = await next(params, token);
            if (raw instanceof ResponseError) return raw;
            const values: unknown[] = raw;
            return params.items.map((item, i): unknown =>
              item.section === 'mdsearch' ? settingsForScope(item.scopeUri, this.schema) : values[i],
            );
          },
        },
      },
      initializationFailedHandler: (error) => {
        this.output.error(`Server initialization failed: ${String(error)}`);
        return false;
      },
    };

    const client = new LanguageClient('mdsearch', 'Markdown Search', serverOptions, clientOptions);
    this.client = client;
    this.clientDisposables.push(
      client.onNotification(StatusNotification, (params: unknown) => {
        this.statusNotifications += 1;
        const status = parseStatus(params);
        if (status) this.emit({ kind: 'server', status });
      }),
      client.onDidChangeState((e) => {
        if (e.newState === State.Stopped && !this.stopping) {
          this.emit({ kind: 'failed', message: 'mdsearch: the server stopped unexpectedly.' });
        }
      }),
    );
    try {
      await client.start();
    } catch (error) {
      const message = `mdsearch: the server failed to start: ${error instanceof Error ? error.message : String(error)}`;
      this.output.error(message);
      this.emit({ kind: 'failed', message });
      void vscode.window.showErrorMessage(message, 'Show logs').then((choice) => {
        if (choice) this.output.show();
      });
      await this.disposeClient();
      return;
    }
    this.output.info('Server started.');
    await this.seedStatus();
  }

  /** Asks for the status once after start: notifications sent before our handler was attached, or
   * by a server that only answers the command, would otherwise leave the bar at "starting". */
  private async seedStatus(): Promise<void> {
    const seen = this.statusNotifications;
    try {
      const status = parseStatus(await this.execute('mdsearch.status', []));
      // A notification that arrived meanwhile is newer than this answer; keep it.
      if (status && this.statusNotifications === seen) this.emit({ kind: 'server', status });
    } catch (error) {
      this.output.warn(`mdsearch.status failed: ${String(error)}`);
    }
  }

  /** Finds the program (logging where it looked and what it found) and remembers it. */
  private async locate(): Promise<Found | undefined> {
    const found = await findServer(localHost, {
      setting: serverPathSetting(vscode.workspace.getConfiguration('mdsearch'), pathContext()),
      envDir: this.envDir,
      // An untrusted workspace chooses its interpreter: running a program from it is not safe.
      pythonInterpreter: () =>
        vscode.workspace.isTrusted
          ? pythonExtensionInterpreter(vscode.extensions.getExtension(PYTHON_EXTENSION_ID), vscode.workspace.workspaceFolders?.[0]?.uri)
          : Promise.resolve(undefined),
      answers: async (program) => (await version(program)) !== undefined,
      skipped: (program) => this.output.warn(`${program} does not answer --version as mdsearch does; passed over.`),
    });
    if (found) this.output.info(`mdsearch: ${found.path} (${found.source})`);
    else this.output.info('mdsearch was not found: not on PATH, in the tool folders, in the extension\'s environment or beside the Python extension\'s interpreter.');
    if (found?.path !== this.program?.path) {
      this.program = found;
      this.programEmitter.fire();
    }
    return found;
  }

  /** The one notification when mdsearch is not found (once per window). */
  private async offerInstall(): Promise<void> {
    if (this.offered) return;
    this.offered = true;
    const install = 'Install mdsearch';
    const copy = 'Copy install command';
    const choice = await vscode.window.showInformationMessage(
      'Markdown Search needs the mdsearch program. Install it into an environment of this extension (a minute or two; several hundred MB), or set "mdsearch.server.path".',
      install,
      copy,
    );
    if (choice === install) {
      await vscode.commands.executeCommand(INSTALL_COMMAND);
    } else if (choice === copy) {
      const cmd = toolInstallCommand(PIP_PACKAGE, (await findProgram(localHost, 'uv')) !== undefined);
      await vscode.env.clipboard.writeText(cmd);
      void vscode.window.showInformationMessage(`Copied: ${cmd}. Run it in a terminal, then "Markdown Search: Restart Server".`);
    }
  }

  /** "Install mdsearch": a fresh environment in the extension's storage, mdsearch-ls installed
   * into it with uv or a Python's venv, then the server started from it. */
  install(): Promise<void> {
    return this.enqueue(async () => {
      await this.doStop();
      const ok = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: 'Installing mdsearch', cancellable: true },
        (progress, token) => this.doInstall((message) => progress.report({ message }), token),
      );
      if (ok) await this.doStart();
    });
  }

  private async doInstall(report: (message: string) => void, token: vscode.CancellationToken): Promise<boolean> {
    const log = (line: string): void => this.output.info(`[install] ${line}`);
    const fail = (message: string): false => {
      log(message);
      void vscode.window.showErrorMessage(`mdsearch: the install failed: ${message}`, 'Show logs').then((c) => c && this.output.show());
      return false;
    };
    report('finding uv or Python 3.10+');
    const uv = await findProgram(localHost, 'uv');
    let python: string | undefined;
    if (!uv) {
      const found = await findPython(localHost.platform, runQuiet);
      for (const reason of found.reasons) log(reason);
      if (!found.python) return fail('no uv and no Python 3.10 or newer found (install one, or uv, and try again).');
      python = found.python;
    }
    const steps = installSteps({ platform: localHost.platform, envDir: this.envDir, pipPackage: PIP_PACKAGE, uv, python });
    log(`into ${this.envDir} with ${uv ? `uv (${uv})` : `Python (${python})`}`);
    // A fresh environment each time: what a failed or cancelled install left is not trusted.
    await fs.promises.rm(this.envDir, { recursive: true, force: true });
    await fs.promises.mkdir(path.dirname(this.envDir), { recursive: true });
    for (const [i, step] of steps.entries()) {
      report(i === 0 ? 'creating the environment' : `installing ${PIP_PACKAGE}`);
      const result = await runSteps([step], log, token);
      if (result.ok) continue;
      if (result.message === 'cancelled') return fail('cancelled');
      // Debian's and Ubuntu's Python has no venv module until python3-venv is installed
      const hint = i === 0 && !uv ? ' (on Debian or Ubuntu, install python3-venv, or install uv)' : '';
      return fail(`${result.message}${hint}; see the log`);
    }
    log('done');
    return true;
  }

  private async doStop(): Promise<void> {
    if (!this.client) return;
    this.stopping = true;
    try {
      if (this.client.state === State.Running) await this.client.stop(3000);
    } catch (error) {
      this.output.warn(`Stopping the server: ${String(error)}`);
    } finally {
      await this.disposeClient();
      this.stopping = false;
      this.emit({ kind: 'stopped', message: 'mdsearch: the server was stopped.' });
    }
  }

  private async disposeClient(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    for (const d of this.clientDisposables.splice(0)) d.dispose();
    if (client) {
      this.stopping = true;
      try {
        await client.dispose(2000);
      } catch {
        // already stopped; nothing left to release
      } finally {
        this.stopping = false;
      }
    }
  }

  async dispose(): Promise<void> {
    this.scheduleRestart.cancel();
    await this.stop();
    for (const d of this.disposables.splice(0)) d.dispose();
  }
}

function pathContext(folder?: vscode.WorkspaceFolder): PathContext {
  const ctx: PathContext = { home: os.homedir() };
  const wf = folder ?? vscode.workspace.workspaceFolders?.[0];
  if (wf) ctx.workspaceFolder = wf.uri.fsPath;
  return ctx;
}

/** Server settings for a resource scope (a folder URI from `workspace/configuration`), or the
 * window scope when none is given. */
function settingsForScope(scopeUri: string | undefined, schema: Record<string, SettingSchema>): ServerSettings {
  const uri = scopeUri ? vscode.Uri.parse(scopeUri) : undefined;
  const folder = uri ? vscode.workspace.getWorkspaceFolder(uri) : undefined;
  return toServerSettings(vscode.workspace.getConfiguration('mdsearch', uri), pathContext(folder), schema);
}
