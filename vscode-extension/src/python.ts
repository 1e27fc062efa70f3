// Which Python runs the server, and whether it can. Order (as in vscode-python-tools-extension-
// template): the `mdsearch.server.pythonPath` setting, then the Python extension's active
// interpreter, then `python3`. Only type imports from `vscode`: the extension object is passed in,
// so the order and the checks are unit-tested without VS Code.
import { execFile } from 'node:child_process';
import type { Event, Uri } from 'vscode';

export const PYTHON_EXTENSION_ID = 'ms-python.python';
export const DEFAULT_PYTHON = process.platform === 'win32' ? 'python' : 'python3';

export type InterpreterSource = 'setting' | 'python-extension' | 'default';

export interface Interpreter {
  path: string;
  source: InterpreterSource;
}

export interface InterpreterSources {
  /** `mdsearch.server.pythonPath`, already expanded; undefined when unset. */
  setting: string | undefined;
  /** Asks the Python extension; resolves undefined when it is absent or has no interpreter. */
  pythonExtension: () => Promise<string | undefined>;
  fallback?: string;
}

/** First source that yields an interpreter wins. A failing Python extension is treated as absent:
 * the server should still start with the fallback rather than not at all. */
export async function resolveInterpreter(sources: InterpreterSources): Promise<Interpreter> {
  if (sources.setting) return { path: sources.setting, source: 'setting' };
  let fromExtension: string | undefined;
  try {
    fromExtension = await sources.pythonExtension();
  } catch {
    fromExtension = undefined;
  }
  if (fromExtension) return { path: fromExtension, source: 'python-extension' };
  return { path: sources.fallback ?? DEFAULT_PYTHON, source: 'default' };
}

/** The part of `vscode.Extension` we use. */
export interface ExtensionLike {
  readonly isActive: boolean;
  readonly exports: unknown;
  activate(): Thenable<unknown>;
}

interface EnvironmentPath {
  id?: string;
  path: string;
}
interface ResolvedEnvironment {
  executable?: { uri?: Pick<Uri, 'fsPath'> };
}
/** The Python extension's environments API (current name `environments`, older `environment`). */
interface EnvironmentsApi {
  getActiveEnvironmentPath(resource?: Uri): EnvironmentPath;
  resolveEnvironment(env: EnvironmentPath): Promise<ResolvedEnvironment | undefined>;
  onDidChangeActiveEnvironmentPath?: Event<unknown>;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

function environmentsApi(exports: unknown): EnvironmentsApi | undefined {
  if (!isObject(exports)) return undefined;
  const api = exports.environments ?? exports.environment;
  if (
    isObject(api) &&
    typeof api.getActiveEnvironmentPath === 'function' &&
    typeof api.resolveEnvironment === 'function'
  ) {
    return api as unknown as EnvironmentsApi;
  }
  return undefined;
}

async function activeApi(extension: ExtensionLike | undefined): Promise<EnvironmentsApi | undefined> {
  if (!extension) return undefined;
  if (!extension.isActive) await extension.activate();
  return environmentsApi(extension.exports);
}

/** The Python extension's active interpreter for `resource`, or undefined. */
export async function pythonExtensionInterpreter(
  extension: ExtensionLike | undefined,
  resource?: Uri,
): Promise<string | undefined> {
  const api = await activeApi(extension);
  if (!api) return undefined;
  const active = api.getActiveEnvironmentPath(resource);
  const resolved = await api.resolveEnvironment(active);
  return resolved?.executable?.uri?.fsPath ?? (active.path || undefined);
}

/** Subscribes to interpreter changes in the Python extension (no-op without it). */
export async function onPythonInterpreterChange(
  extension: ExtensionLike | undefined,
  listener: () => void,
): Promise<{ dispose(): unknown } | undefined> {
  const api = await activeApi(extension);
  return api?.onDidChangeActiveEnvironmentPath?.(() => listener());
}

/** The server process: `<python> -m mdsearch_ls serve`. */
export function serverCommand(python: string, module: string): { command: string; args: string[] } {
  return { command: python, args: ['-m', module, 'serve'] };
}

/** Shell-quotes one argument for the copyable install command. */
export function shellQuote(arg: string): string {
  if (/^[\w@%+=:,./-]+$/.test(arg)) return arg;
  return process.platform === 'win32' ? `"${arg.replace(/"/g, '""')}"` : `'${arg.replace(/'/g, `'\\''`)}'`;
}

export function installCommand(python: string, pipPackage: string): string {
  return `${shellQuote(python)} -m pip install ${pipPackage}`;
}

export type ImportCheck =
  | { ok: true; version: string }
  | { ok: false; reason: 'not-found' | 'not-importable' | 'timeout'; detail: string };

/** Runs `<python> -c "import <module>"` so a missing package becomes a clear message before the
 * language client starts (otherwise the client only reports that the server exited). */
export function checkImportable(
  python: string,
  module: string,
  options: { cwd?: string; timeoutMs?: number } = {},
): Promise<ImportCheck> {
  const code = `import ${module} as m; print(getattr(m, '__version__', '?'))`;
  return new Promise((resolve) => {
    execFile(
      python,
      ['-c', code],
      { cwd: options.cwd, timeout: options.timeoutMs ?? 30_000, windowsHide: true },
      (error, stdout, stderr) => {
        if (!error) {
          resolve({ ok: true, version: stdout.trim() });
          return;
        }
        const err = error as NodeJS.ErrnoException & { killed?: boolean };
        if (err.code === 'ENOENT' || err.code === 'EACCES') {
          resolve({ ok: false, reason: 'not-found', detail: `${python}: ${err.message}` });
        } else if (err.killed) {
          resolve({ ok: false, reason: 'timeout', detail: `${python} did not answer in time` });
        } else {
          const lines = stderr.trim().split(/\r?\n/);
          resolve({ ok: false, reason: 'not-importable', detail: lines[lines.length - 1] ?? err.message });
        }
      },
    );
  });
}

/** The notification text for a failed check. */
export function importErrorMessage(python: string, module: string, check: ImportCheck & { ok: false }): string {
  switch (check.reason) {
    case 'not-found':
      return `mdsearch: cannot run the Python interpreter "${python}". Set "mdsearch.server.pythonPath" to a Python that has the mdsearch-ls package installed.`;
    case 'timeout':
      return `mdsearch: "${python}" did not answer while checking for ${module}. Check the interpreter in "mdsearch.server.pythonPath".`;
    case 'not-importable':
      return `mdsearch: the Python package ${module} is not installed for "${python}" (${check.detail}). Install it there, or point "mdsearch.server.pythonPath" at a Python that has it.`;
  }
}
