// Owns the language client: finds the interpreter, checks that the server package imports, starts
// `<python> -m mdsearch_ls serve`, restarts it, and routes its status events. Lifecycle operations
// are queued so a restart never overlaps a start or a stop.
import * as os from 'node:os';
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
import { parseStatus, StatusNotification, toRelatedPick } from './protocol';
import {
  checkImportable,
  importErrorMessage,
  installCommand,
  onPythonInterpreterChange,
  PYTHON_EXTENSION_ID,
  pythonExtensionInterpreter,
  resolveInterpreter,
  serverCommand,
  type Interpreter,
} from './python';
import {
  type PathContext,
  pythonPathSetting,
  type ServerSettings,
  type SettingSchema,
  toServerSettings,
} from './settings';
import { type ClientStatus } from './status';

/** `serverInfo` in package.json: the single source of the server's name, module and pip name. */
export interface ServerInfo {
  name: string;
  module: string;
  pipPackage: string;
}

export function readServerInfo(packageJson: unknown): ServerInfo {
  const fallback: ServerInfo = { name: 'mdsearch', module: 'mdsearch_ls', pipPackage: 'mdsearch-ls' };
  if (typeof packageJson !== 'object' || packageJson === null || !('serverInfo' in packageJson)) return fallback;
  const info = packageJson.serverInfo;
  if (typeof info !== 'object' || info === null) return fallback;
  const pick = (key: keyof ServerInfo): string => {
    const v = (info as Record<string, unknown>)[key];
    return typeof v === 'string' && v ? v : fallback[key];
  };
  return { name: pick('name'), module: pick('module'), pipPackage: pick('pipPackage') };
}

/** Restart delay after a settings change: typing in the settings editor fires one event per key. */
const RESTART_DEBOUNCE_MS = 750;

export class ServerManager implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private clientDisposables: vscode.Disposable[] = [];
  private lifecycle: Promise<void> = Promise.resolve();
  private stopping = false;
  private statusNotifications = 0;
  private interpreter: Interpreter | undefined;
  private readonly statusEmitter = new vscode.EventEmitter<ClientStatus>();
  private readonly disposables: vscode.Disposable[] = [this.statusEmitter];
  /** Fires for every client-side state change and every `mdsearch/status` the server sends. */
  readonly onStatus = this.statusEmitter.event;
  readonly scheduleRestart: Debounced<[]>;

  constructor(
    private readonly info: ServerInfo,
    private readonly output: vscode.LogOutputChannel,
    private readonly schema: Record<string, SettingSchema>,
  ) {
    this.scheduleRestart = debounce(() => void this.restart(), RESTART_DEBOUNCE_MS);
    const pythonExtension = vscode.extensions.getExtension(PYTHON_EXTENSION_ID);
    // Follow the Python extension's interpreter only while our own setting does not override it.
    void onPythonInterpreterChange(pythonExtension, () => {
      if (!pythonPathSetting(vscode.workspace.getConfiguration('mdsearch'), pathContext())) {
        this.output.info('Python extension changed the interpreter; restarting the server.');
        this.scheduleRestart();
      }
    }).then(
      (d) => d && this.disposables.push(d),
      (e: unknown) => this.output.warn(`Python extension API unavailable: ${String(e)}`),
    );
  }

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  get pythonPath(): string | undefined {
    return this.interpreter?.path;
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
    const client = this.client;
    if (!client || client.state !== State.Running) {
      throw new Error('the mdsearch server is not running (see "Markdown Search: Show Logs")');
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
    const cfg = vscode.workspace.getConfiguration('mdsearch');
    const interpreter = await resolveInterpreter({
      setting: pythonPathSetting(cfg, pathContext()),
      pythonExtension: () =>
        pythonExtensionInterpreter(
          vscode.extensions.getExtension(PYTHON_EXTENSION_ID),
          vscode.workspace.workspaceFolders?.[0]?.uri,
        ),
    });
    this.interpreter = interpreter;
    this.output.info(`Python: ${interpreter.path} (from ${interpreter.source})`);

    const cwd = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const check = await checkImportable(interpreter.path, this.info.module, { cwd });
    if (!check.ok) {
      const message = importErrorMessage(interpreter.path, this.info.module, check);
      this.output.error(message);
      this.emit({ kind: 'failed', message });
      void this.offerFix(message, interpreter.path);
      return;
    }
    this.output.info(`${this.info.module} ${check.version} found.`);

    const { command, args } = serverCommand(interpreter.path, this.info.module);
    const serverOptions: ServerOptions = {
      command,
      args,
      options: { cwd, env: { ...process.env, PYTHONUNBUFFERED: '1' } },
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

    const client = new LanguageClient(this.info.name, 'Markdown Search', serverOptions, clientOptions);
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

  private async offerFix(message: string, python: string): Promise<void> {
    const openSettings = 'Open settings';
    const copyInstall = 'Copy install command';
    const choice = await vscode.window.showErrorMessage(message, openSettings, copyInstall);
    if (choice === openSettings) {
      await vscode.commands.executeCommand('workbench.action.openSettings', 'mdsearch.server.pythonPath');
    } else if (choice === copyInstall) {
      const cmd = installCommand(python, this.info.pipPackage);
      await vscode.env.clipboard.writeText(cmd);
      void vscode.window.showInformationMessage(`Copied: ${cmd}. Run it in a terminal, then "Markdown Search: Restart Server".`);
    }
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
