// The Python extension's interpreter, one of the places mdsearch may be installed (see
// discovery.ts). Only type imports from `vscode`: the extension object is passed in, so the API
// handling is unit-tested without VS Code.
import type { Event, Uri } from 'vscode';

export const PYTHON_EXTENSION_ID = 'ms-python.python';

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
