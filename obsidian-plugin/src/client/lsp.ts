// One `mdsearch serve` process and the LSP conversation with it, over stdio. The plugin is the
// language client: it answers the server's requests (configuration, capability registration,
// progress tokens), forwards its notifications (status, diagnostics, log lines), and offers
// typed calls for what the plugin asks (search, related, completion, code actions) and sends
// (document and file events). No `obsidian` import: run under Node's test runner against the
// real server.
import { type ChildProcess, spawn } from 'node:child_process';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  CancellationTokenSource,
  type CancellationToken,
  createProtocolConnection,
  type Message,
  type ProtocolConnection,
  StreamMessageReader,
  StreamMessageWriter,
} from 'vscode-languageserver-protocol/node';
import type { ServerCommand } from './locate';
import {
  type Hit,
  type LinkAction,
  type LinkItem,
  type Mention,
  parseCodeActions,
  parseCompletion,
  parseHits,
  parseMentions,
  parseStatus,
  type Range,
  type RelatedArgs,
  type SearchArgs,
  ServerCommands,
  type StatusParams,
  StatusNotification,
} from './protocol';

export { CancellationTokenSource, type CancellationToken };

export interface LspClientOptions {
  command: ServerCommand;
  /** The vault's folder: the one workspace folder. None for a server that only loads its model
   * (the settings tab's Test). */
  root?: string;
  /** The `mdsearch` settings section, asked again on each workspace/configuration. */
  settings: () => Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
  onStatus?: (status: StatusParams) => void;
  onMentions?: (uri: string, mentions: Mention[], version: number | null) => void;
  onLog?: (line: string) => void;
  /** window/showMessage from the server (an index error, a folder too large to index). */
  onMessage?: (message: string, type: number) => void;
  /** The process ended without stop(): a crash, a kill, or an exit at start. */
  onExit?: (reason: string) => void;
  initializeTimeoutMs?: number;
}

export class ServerStartError extends Error {
  override readonly name = 'ServerStartError';
  constructor(message: string, readonly notFound = false) {
    super(message);
  }
}

/** A write to a server that just died fails inside vscode-jsonrpc's sendRequest, which rethrows
 * it from a promise nobody holds (an unhandled rejection). Swallowed here: the process's exit
 * disposes the connection, which rejects every pending request with a proper error. */
class QuietWriter extends StreamMessageWriter {
  override write(msg: Message): Promise<void> {
    return super.write(msg).catch(() => undefined);
  }
}

export function fileUri(file: string): string {
  return pathToFileURL(file).href;
}

/** Keeps the last lines a process wrote to stderr: the reason of a crash, for the notice. */
class Tail {
  private lines: string[] = [];
  private partial = '';
  constructor(private readonly max: number, private readonly onLine?: (line: string) => void) {}
  push(chunk: string): void {
    const parts = (this.partial + chunk).split(/\r?\n/);
    this.partial = parts.pop() ?? '';
    for (const line of parts) {
      this.onLine?.(line);
      this.lines.push(line);
    }
    if (this.lines.length > this.max) this.lines.splice(0, this.lines.length - this.max);
  }
  /** The last error-looking line, or the last line. */
  reason(): string {
    const all = this.partial ? [...this.lines, this.partial] : this.lines;
    const err = [...all].reverse().find((l) => /error|exception|traceback|no module/i.test(l) && l.trim());
    return (err ?? all.filter((l) => l.trim()).pop() ?? '').trim();
  }
}

export class LspClient {
  private stopping = false;
  private exited = false;
  private started = false;
  private readonly exitPromise: Promise<void>;
  private openVersions = new Map<string, number>();
  /** When the process started (ms since epoch), for the supervisor's "it ran a while" rule. */
  readonly startedAt = Date.now();

  private constructor(
    private readonly proc: ChildProcess,
    private readonly connection: ProtocolConnection,
    private readonly tail: Tail,
    readonly options: LspClientOptions,
    exit: Promise<void>,
  ) {
    this.exitPromise = exit;
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  /** The last error-looking line the process wrote to stderr (its log), or ''. */
  get lastError(): string {
    return this.tail.reason();
  }

  get running(): boolean {
    return !this.exited && !this.stopping;
  }

  /** Starts the process and completes initialize/initialized. Rejects with ServerStartError
   * (notFound set when the executable itself is missing) and leaves no process behind. */
  static async start(options: LspClientOptions): Promise<LspClient> {
    const { command, args } = options.command;
    const tail = new Tail(40, options.onLog);
    let proc: ChildProcess;
    try {
      proc = spawn(command, args, {
        cwd: options.root ?? os.homedir(),
        env: { ...(options.env ?? process.env), PYTHONUNBUFFERED: '1' },
        stdio: ['pipe', 'pipe', 'pipe'],
        windowsHide: true,
      });
    } catch (error) {
      throw new ServerStartError(`mdsearch: cannot start ${command}: ${String(error)}`, true);
    }
    await new Promise<void>((resolve, reject) => {
      proc.once('spawn', () => resolve());
      proc.once('error', (e: NodeJS.ErrnoException) => {
        const missing = e.code === 'ENOENT' || e.code === 'EACCES';
        reject(new ServerStartError(
          missing
            ? `mdsearch: cannot run ${command} (${e.code === 'ENOENT' ? 'no such file' : 'permission denied'}).`
            : `mdsearch: cannot start ${command}: ${e.message}`,
          missing,
        ));
      });
    });
    proc.stderr?.setEncoding('utf8');
    proc.stderr?.on('data', (d: string) => tail.push(d));
    let onExit: (reason: string) => void = () => undefined;
    const exit = new Promise<void>((resolve) => {
      proc.once('exit', (code, signal) => {
        onExit(signal ? `killed by ${signal}` : `exit code ${String(code)}`);
        resolve();
      });
    });
    const stdout = proc.stdout;
    const stdin = proc.stdin;
    if (!stdout || !stdin) throw new ServerStartError('mdsearch: the server process has no stdio pipes');
    const connection = createProtocolConnection(new StreamMessageReader(stdout), new QuietWriter(stdin));
    const client = new LspClient(proc, connection, tail, options, exit);
    onExit = (how) => client.handleExit(how);
    stdin.on('error', () => undefined); // EPIPE when the server died: the exit handler reports it
    client.wire();
    connection.listen();
    try {
      await client.initialize(options.initializeTimeoutMs ?? 60_000);
    } catch (error) {
      client.stopping = true;
      client.kill();
      await exit;
      const why = tail.reason();
      throw new ServerStartError(
        `mdsearch: the server did not start: ${error instanceof Error ? error.message : String(error)}${why ? ` (${why})` : ''}`,
      );
    }
    return client;
  }

  private handleExit(how: string): void {
    this.exited = true;
    this.connection.dispose();
    if (this.stopping || !this.started) return; // start() reports a failure during initialize
    const why = this.tail.reason();
    this.options.onExit?.(`the server stopped (${how})${why ? `: ${why}` : ''}`);
  }

  private wire(): void {
    const c = this.connection;
    const o = this.options;
    c.onRequest('workspace/configuration', (params: { items?: { section?: string }[] }) =>
      (params.items ?? []).map((item) => (item.section === 'mdsearch' ? o.settings() : null)),
    );
    c.onRequest('client/registerCapability', () => null);
    c.onRequest('client/unregisterCapability', () => null);
    c.onRequest('window/workDoneProgress/create', () => null);
    c.onRequest('workspace/codeLens/refresh', () => null);
    c.onRequest('workspace/inlayHint/refresh', () => null);
    c.onRequest('workspace/diagnostic/refresh', () => null);
    c.onRequest('window/showMessageRequest', () => null);
    c.onNotification(StatusNotification, (params: unknown) => {
      const status = parseStatus(params);
      if (status) o.onStatus?.(status);
    });
    c.onNotification('textDocument/publishDiagnostics', (p: { uri?: unknown; diagnostics?: unknown; version?: unknown }) => {
      if (typeof p.uri !== 'string') return;
      o.onMentions?.(p.uri, parseMentions(p.diagnostics), typeof p.version === 'number' ? p.version : null);
    });
    c.onNotification('window/logMessage', (p: { message?: unknown }) => {
      if (typeof p.message === 'string') o.onLog?.(p.message);
    });
    c.onNotification('window/showMessage', (p: { message?: unknown; type?: unknown }) => {
      if (typeof p.message === 'string') o.onMessage?.(p.message, typeof p.type === 'number' ? p.type : 3);
    });
    c.onClose(() => undefined);
    c.onError(() => undefined);
  }

  private async initialize(timeoutMs: number): Promise<void> {
    const root = this.options.root === undefined ? undefined : path.resolve(this.options.root);
    const uri = root === undefined ? null : fileUri(root);
    const params = {
      processId: process.pid,
      clientInfo: { name: 'obsidian-mdsearch' },
      rootUri: uri,
      workspaceFolders: root === undefined || uri === null ? [] : [{ uri, name: path.basename(root) }],
      initializationOptions: this.options.settings(),
      capabilities: {
        general: { positionEncodings: ['utf-16'] },
        workspace: {
          configuration: true,
          workspaceFolders: true,
          didChangeConfiguration: { dynamicRegistration: false },
          // Obsidian's vault events are sent as these; no need for the server to register.
          didChangeWatchedFiles: { dynamicRegistration: false },
          fileOperations: { didRename: true, didDelete: true, didCreate: false },
        },
        textDocument: {
          synchronization: { didSave: true, dynamicRegistration: false },
          completion: { completionItem: { snippetSupport: false }, contextSupport: true },
          codeAction: { codeActionLiteralSupport: { codeActionKind: { valueSet: ['quickfix', 'source'] } } },
          publishDiagnostics: { versionSupport: true },
        },
        window: { workDoneProgress: false },
      },
    };
    let timer: number | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = window.setTimeout(() => reject(new Error(`no answer to initialize within ${timeoutMs / 1000} s`)), timeoutMs);
    });
    const exited = this.exitPromise.then(() => {
      throw new Error('the process exited during initialize');
    });
    exited.catch(() => undefined);
    try {
      await Promise.race([this.connection.sendRequest('initialize', params), timeout, exited]);
    } finally {
      window.clearTimeout(timer);
    }
    await this.connection.sendNotification('initialized', {});
    this.started = true;
  }

  // ---- requests -------------------------------------------------------------------------------

  private request<T>(method: string, params: unknown, token?: CancellationToken): Promise<T> {
    if (!this.running) return Promise.reject(new Error('the mdsearch server is not running'));
    return token ? this.connection.sendRequest(method, params, token) : this.connection.sendRequest(method, params);
  }

  execute(command: string, args: unknown[], token?: CancellationToken): Promise<unknown> {
    return this.request('workspace/executeCommand', { command, arguments: args }, token);
  }

  async search(args: SearchArgs, token?: CancellationToken): Promise<Hit[]> {
    return parseHits(await this.execute(ServerCommands.search, [args], token));
  }

  async related(args: RelatedArgs, token?: CancellationToken): Promise<Hit[]> {
    return parseHits(await this.execute(ServerCommands.related, [args], token));
  }

  reindex(): Promise<unknown> {
    return this.execute(ServerCommands.reindex, []);
  }

  async status(): Promise<StatusParams | undefined> {
    return parseStatus(await this.execute(ServerCommands.status, []));
  }

  async completion(uri: string, line: number, character: number, token?: CancellationToken): Promise<LinkItem[]> {
    const result = await this.request<unknown>('textDocument/completion', {
      textDocument: { uri },
      position: { line, character },
      context: { triggerKind: 1 },
    }, token);
    return parseCompletion(result);
  }

  /** Code actions with their edits for `range` of an open note (link suggestions, mention
   * links; `only` narrows to kinds like "quickfix" or "source.mdsearch.linkMentions"). */
  async codeActions(uri: string, range: Range, only?: string[], token?: CancellationToken): Promise<LinkAction[]> {
    const result = await this.request<unknown>('textDocument/codeAction', {
      textDocument: { uri },
      range,
      context: only ? { diagnostics: [], only } : { diagnostics: [] },
    }, token);
    return parseCodeActions(result, uri);
  }

  // ---- notifications --------------------------------------------------------------------------

  private notify(method: string, params: unknown): void {
    if (!this.running) return;
    this.connection.sendNotification(method, params).catch(() => undefined);
  }

  isOpen(uri: string): boolean {
    return this.openVersions.has(uri);
  }

  didOpen(uri: string, text: string): void {
    this.openVersions.set(uri, 1);
    this.notify('textDocument/didOpen', { textDocument: { uri, languageId: 'markdown', version: 1, text } });
  }

  /** The buffer's whole text (the server syncs full documents). Returns the new version. */
  didChange(uri: string, text: string): number {
    const version = (this.openVersions.get(uri) ?? 1) + 1;
    this.openVersions.set(uri, version);
    this.notify('textDocument/didChange', { textDocument: { uri, version }, contentChanges: [{ text }] });
    return version;
  }

  version(uri: string): number | undefined {
    return this.openVersions.get(uri);
  }

  didSave(uri: string): void {
    this.notify('textDocument/didSave', { textDocument: { uri } });
  }

  didClose(uri: string): void {
    this.openVersions.delete(uri);
    this.notify('textDocument/didClose', { textDocument: { uri } });
  }

  /** FileChangeType: 1 created, 2 changed, 3 deleted. */
  didChangeWatchedFiles(changes: { uri: string; type: 1 | 2 | 3 }[]): void {
    if (changes.length) this.notify('workspace/didChangeWatchedFiles', { changes });
  }

  didRenameFiles(files: { oldUri: string; newUri: string }[]): void {
    if (files.length) this.notify('workspace/didRenameFiles', { files });
  }

  didChangeConfiguration(): void {
    this.notify('workspace/didChangeConfiguration', { settings: { mdsearch: this.options.settings() } });
  }

  // ---- lifecycle ------------------------------------------------------------------------------

  /** shutdown, exit, then close stdin (the server also exits when its stdin closes); killed if
   * it is still there after `graceMs`. */
  async stop(graceMs = 3000): Promise<void> {
    if (this.exited) return;
    this.stopping = true;
    // The grace timers are cleared once the process is gone (an unload must leave none behind).
    const timers: number[] = [];
    const wait = (ms: number) => new Promise<void>((r) => timers.push(window.setTimeout(r, ms)));
    try {
      try {
        await Promise.race([this.connection.sendRequest('shutdown'), wait(graceMs)]);
        await this.connection.sendNotification('exit');
      } catch {
        // the connection may already be closed
      }
      this.proc.stdin?.end();
      await Promise.race([this.exitPromise, wait(graceMs)]);
      if (!this.exited) {
        this.kill();
        await Promise.race([this.exitPromise, wait(1000)]);
      }
    } finally {
      for (const t of timers) window.clearTimeout(t);
    }
  }

  /** SIGKILL (tests use it as a crash; stop() as a last resort). */
  kill(): void {
    try {
      this.proc.kill('SIGKILL');
    } catch {
      // already gone
    }
  }

  /** Resolves when the process has exited. */
  exited$(): Promise<void> {
    return this.exitPromise;
  }
}
