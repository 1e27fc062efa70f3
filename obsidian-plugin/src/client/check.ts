// The settings tab's Test: does this executable run, and does its server load the model? A
// `--version` alone passed when the model's package was missing, and the first search then
// failed. So the check starts the server as the plugin does, on no folder (nothing is indexed,
// nothing written), and waits for its own word on the model: `mdsearch/status`'s model_state.
import { checkVersion, type ServerCommand } from './locate';
import { LspClient } from './lsp';

export type ServerCheck = { ok: true; version: string } | { ok: false; error: string };

export interface CheckOptions {
  /** The server's `mdsearch` settings section (the backend decides which model loads). */
  settings: Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
  /** For the version, the start and the model's load each. */
  timeoutMs?: number;
}

/** How long the server's error message may trail its status saying the model failed (both are
 * sent at once; the message says why). */
const REASON_GRACE_MS = 2000;

export async function checkServer(command: ServerCommand, options: CheckOptions): Promise<ServerCheck> {
  const timeoutMs = options.timeoutMs ?? 120_000;
  const version = await checkVersion(command, timeoutMs, options.env);
  if (!version.ok) return version;
  const timers: number[] = [];
  const after = (ms: number): Promise<void> => new Promise((resolve) => timers.push(window.setTimeout(resolve, ms)));
  let modelState: (loaded: boolean) => void = () => undefined;
  const model = new Promise<boolean>((resolve) => {
    modelState = resolve;
  });
  let reason: (why: string) => void = () => undefined;
  const why = new Promise<string>((resolve) => {
    reason = resolve;
  });
  let client: LspClient | undefined;
  try {
    client = await LspClient.start({
      command,
      settings: () => options.settings,
      env: options.env,
      initializeTimeoutMs: timeoutMs,
      onStatus: (status) => {
        if (status.model_state === 'loaded') modelState(true);
        else if (status.model_state === 'error') modelState(false);
      },
      onMessage: (message, type) => {
        if (type === 1) reason(message.replace(/^mdsearch: /, ''));
      },
      onExit: (exit) => {
        reason(exit);
        modelState(false);
      },
    });
    const loaded = await Promise.race([model, why.then(() => false), after(timeoutMs).then(() => undefined)]);
    if (loaded) return { ok: true, version: version.version };
    const cause = loaded === undefined
      ? `the model did not load within ${timeoutMs / 1000} s`
      : await Promise.race([why, after(REASON_GRACE_MS).then(() => client?.lastError || 'the server says the model failed to load')]);
    return { ok: false, error: `${version.version} at ${command.command} runs, but cannot load its model: ${cause}` };
  } catch (error) {
    return { ok: false, error: `${version.version} at ${command.command} runs, but its server does not start: ${error instanceof Error ? error.message : String(error)}` };
  } finally {
    for (const t of timers) window.clearTimeout(t);
    await client?.stop();
  }
}
