// Keeps one server running for the vault: starts it, restarts it after a crash with a growing
// delay, tells the user once when it keeps failing, and gives up (until asked again) instead of
// looping. A missing executable is not retried at all: no delay makes it appear.
import { ExecutableNotFoundError, type ServerCommand } from './locate';
import { LspClient, type LspClientOptions, ServerStartError } from './lsp';

export interface BackoffPolicy {
  /** Delay before the first restart; doubled after each further failure. */
  initialMs: number;
  maxMs: number;
  /** A notice once this many failures in a row have happened. */
  noticeAfter: number;
  /** Stop retrying after this many failures in a row. */
  giveUpAfter: number;
  /** A server that ran this long before it died starts the count afresh. */
  stableMs: number;
}

export const DEFAULT_BACKOFF: BackoffPolicy = {
  initialMs: 1000,
  maxMs: 30_000,
  noticeAfter: 3,
  giveUpAfter: 6,
  stableMs: 120_000,
};

/** Delay before restart number `failures` (1-based). */
export function backoffDelay(failures: number, policy: BackoffPolicy): number {
  return Math.min(policy.maxMs, policy.initialMs * 2 ** Math.max(0, failures - 1));
}

export type ServerState =
  | { kind: 'stopped' }
  | { kind: 'starting' }
  | { kind: 'running'; pid: number | undefined }
  | { kind: 'restarting'; inMs: number; failures: number; reason: string }
  | { kind: 'failed'; message: string };

export interface SupervisorOptions {
  /** Finds the executable (may throw ExecutableNotFoundError). */
  locate: () => Promise<ServerCommand>;
  /** Everything LspClient needs besides the command. */
  client: Omit<LspClientOptions, 'command' | 'onExit'>;
  backoff?: Partial<BackoffPolicy>;
  onState?: (state: ServerState) => void;
  /** A message worth a notice (Obsidian's Notice); never more than once per failure streak.
   * `notFound`: the executable is missing (the plugin offers to install it). */
  onNotice?: (message: string, notFound: boolean) => void;
  /** Each new running client (the vault sync re-opens the active note on it). */
  onClient?: (client: LspClient) => void;
  /** Replaced in tests that do not want to wait for LspClient.start. */
  connect?: (options: LspClientOptions) => Promise<LspClient>;
}

export class ServerSupervisor {
  private current: LspClient | undefined;
  private timer: number | undefined;
  private failures = 0;
  private noticed = false;
  private wanted = false;
  private generation = 0;
  private starting: Promise<void> | undefined;
  private stateValue: ServerState = { kind: 'stopped' };
  readonly policy: BackoffPolicy;
  /** How many processes were started (tests check that a missing executable is tried once). */
  attempts = 0;

  constructor(private readonly options: SupervisorOptions) {
    this.policy = { ...DEFAULT_BACKOFF, ...options.backoff };
  }

  get client(): LspClient | undefined {
    return this.current?.running ? this.current : undefined;
  }

  get state(): ServerState {
    return this.stateValue;
  }

  private setState(state: ServerState): void {
    this.stateValue = state;
    this.options.onState?.(state);
  }

  /** Starts the server unless it runs or is starting. Resolves once that attempt ended
   * (running, or failed with the state saying why); never rejects. */
  start(): Promise<void> {
    this.wanted = true;
    if (this.current?.running) return Promise.resolve();
    if (this.starting) return this.starting;
    this.clearTimer();
    const generation = this.generation;
    this.starting = this.attempt(generation).finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  /** Stops the server and any pending restart. */
  async stop(): Promise<void> {
    this.wanted = false;
    this.generation += 1;
    this.clearTimer();
    await this.starting?.catch(() => undefined);
    const client = this.current;
    this.current = undefined;
    if (client) await client.stop();
    this.setState({ kind: 'stopped' });
  }

  /** The user's "Restart server" (or a new executable): a fresh failure count. */
  async restart(): Promise<void> {
    await this.stop();
    this.failures = 0;
    this.noticed = false;
    await this.start();
  }

  private clearTimer(): void {
    window.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async attempt(generation: number): Promise<void> {
    this.setState({ kind: 'starting' });
    let command: ServerCommand;
    try {
      command = await this.options.locate();
    } catch (error) {
      this.notFound(error instanceof Error ? error.message : String(error));
      return;
    }
    if (generation !== this.generation) return;
    this.attempts += 1;
    let client: LspClient | undefined;
    const startedAt = Date.now();
    try {
      const connect = this.options.connect ?? ((o: LspClientOptions) => LspClient.start(o));
      client = await connect({
        ...this.options.client,
        command,
        onExit: (reason) => {
          if (client) this.crashed(client, reason);
          else if (generation === this.generation) this.failed(reason, Date.now() - startedAt);
        },
      });
    } catch (error) {
      if (generation !== this.generation) return;
      if (error instanceof ServerStartError && error.notFound) {
        this.notFound(error.message);
        return;
      }
      this.failed(error instanceof Error ? error.message : String(error), 0);
      return;
    }
    if (generation !== this.generation || !this.wanted) {
      await client.stop();
      return;
    }
    if (!client.running) return; // died right after initialize: its exit is counted already
    this.current = client;
    this.setState({ kind: 'running', pid: client.pid });
    this.options.onClient?.(client);
  }

  private notFound(message: string): void {
    this.setState({ kind: 'failed', message });
    if (!this.noticed) {
      this.noticed = true;
      this.options.onNotice?.(message, true);
    }
  }

  private crashed(client: LspClient, reason: string): void {
    if (this.current !== client) return;
    this.current = undefined;
    this.failed(reason, Date.now() - client.startedAt);
  }

  private failed(reason: string, ranForMs: number): void {
    if (!this.wanted) return;
    if (ranForMs >= this.policy.stableMs) {
      this.failures = 0;
      this.noticed = false;
    }
    this.failures += 1;
    if (this.failures >= this.policy.giveUpAfter) {
      const message = `mdsearch: the server failed ${this.failures} times in a row and is not restarted again (${reason}). Fix the cause, then run "mdsearch: Restart server".`;
      this.setState({ kind: 'failed', message });
      this.options.onNotice?.(message, false);
      return;
    }
    const inMs = backoffDelay(this.failures, this.policy);
    this.setState({ kind: 'restarting', inMs, failures: this.failures, reason });
    if (this.failures >= this.policy.noticeAfter && !this.noticed) {
      this.noticed = true;
      this.options.onNotice?.(`mdsearch: the server keeps failing (${reason}); retrying in ${Math.round(inMs / 1000)} s.`, false);
    }
    const generation = this.generation;
    this.clearTimer();
    this.timer = window.setTimeout(() => {
      this.timer = undefined;
      if (generation === this.generation && this.wanted) void this.start();
    }, inMs);
  }
}

export { ExecutableNotFoundError };
