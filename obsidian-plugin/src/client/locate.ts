// Finding the `mdsearch` executable. GUI apps start with a minimal PATH (launchd on macOS, a
// desktop file on Linux), so an empty setting is looked up the way a terminal would find it:
// through the user's login shell, then in the places pip, pipx, uv and Homebrew install to.
import { execFile } from 'node:child_process';
import { constants as fsConstants, promises as fs } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export const EXECUTABLE_NAME = 'mdsearch';

/** How the server is started: `mdsearch serve`, or `<python> -m mdsearch_ls serve` when the
 * setting names a Python that has the package. */
export interface ServerCommand {
  command: string;
  args: string[];
  /** Where the path came from, for the settings tab and the logs. */
  source: 'setting' | 'login-shell' | 'path' | 'common-location';
}

export const INSTALL_HINT =
  'Install mdsearch (in a clone of it: `pipx install .`, or `pip install -e .` in a virtual environment), ' +
  'then set the path of its `mdsearch` executable in Settings → mdsearch.';

/** The executable is missing or unusable: shown once, never retried on a timer. */
export class ExecutableNotFoundError extends Error {
  override readonly name = 'ExecutableNotFoundError';
}

export function isPython(file: string): boolean {
  return /^python(\d+(\.\d+)*)?(\.exe)?$/i.test(path.basename(file));
}

export function commandFor(executable: string, source: ServerCommand['source']): ServerCommand {
  return isPython(executable)
    ? { command: executable, args: ['-m', 'mdsearch_ls', 'serve'], source }
    : { command: executable, args: ['serve'], source };
}

export function expandHome(value: string, home: string = os.homedir()): string {
  const v = value.trim();
  if (v === '~') return home;
  if (v.startsWith('~/') || v.startsWith('~\\')) return path.join(home, v.slice(2));
  return v;
}

async function isExecutable(file: string): Promise<boolean> {
  try {
    const stat = await fs.stat(file);
    if (!stat.isFile()) return false;
    if (process.platform === 'win32') return true;
    await fs.access(file, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

export interface LocateOptions {
  /** The per-device setting; empty means "find it". */
  setting: string;
  env?: NodeJS.ProcessEnv;
  home?: string;
  /** Login-shell lookup; replaced in tests. Resolves the path or undefined. */
  shellLookup?: (name: string) => Promise<string | undefined>;
}

const MARK = '__MDSEARCH_PATH__';

/** `command -v <name>` in the user's login (and interactive: zsh users set PATH in .zshrc)
 * shell, with markers around the answer because rc files may print. 5 s at most. */
export function loginShellLookup(name: string, env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  if (process.platform === 'win32') {
    return new Promise((resolve) => {
      execFile('where', [name], { timeout: 5000, windowsHide: true }, (err, stdout) => {
        resolve(err ? undefined : stdout.split(/\r?\n/)[0]?.trim() || undefined);
      });
    });
  }
  const shell = env.SHELL || '/bin/sh';
  const script = `printf '%s%s%s\\n' '${MARK}' "$(command -v ${name})" '${MARK}'`;
  return new Promise((resolve) => {
    const child = execFile(shell, ['-l', '-i', '-c', script], { timeout: 5000, env, windowsHide: true }, (_err, stdout) => {
      const m = new RegExp(`${MARK}(.*)${MARK}`).exec(stdout);
      const found = m?.[1]?.trim();
      resolve(found && path.isAbsolute(found) ? found : undefined);
    });
    child.stdin?.end();
  });
}

/** Places installers put console scripts, tried after the login shell. */
export function commonLocations(home: string): string[] {
  if (process.platform === 'win32') {
    const appData = process.env.APPDATA ?? path.join(home, 'AppData', 'Roaming');
    return [path.join(home, '.local', 'bin', 'mdsearch.exe'), path.join(appData, 'Python', 'Scripts', 'mdsearch.exe')];
  }
  return [
    path.join(home, '.local', 'bin', EXECUTABLE_NAME),
    '/opt/homebrew/bin/mdsearch',
    '/usr/local/bin/mdsearch',
    '/usr/bin/mdsearch',
  ];
}

/** The server command for this device, or ExecutableNotFoundError saying where it looked and how
 * to install. A setting is taken as it is (a missing file is an error, not a reason to guess). */
export async function locateServer(options: LocateOptions): Promise<ServerCommand> {
  const env = options.env ?? process.env;
  const home = options.home ?? os.homedir();
  const setting = expandHome(options.setting, home);
  if (setting) {
    if (!path.isAbsolute(setting)) {
      throw new ExecutableNotFoundError(`mdsearch: the executable setting "${setting}" is not an absolute path. Use the full path (for example ${path.join(home, '.local', 'bin', EXECUTABLE_NAME)}), or leave it empty to look it up.`);
    }
    if (!(await isExecutable(setting))) {
      throw new ExecutableNotFoundError(`mdsearch: "${setting}" (from the executable setting) does not exist or is not executable. ${INSTALL_HINT}`);
    }
    return commandFor(setting, 'setting');
  }
  const lookup = options.shellLookup ?? ((name: string) => loginShellLookup(name, env));
  let fromShell: string | undefined;
  try {
    fromShell = await lookup(EXECUTABLE_NAME);
  } catch {
    fromShell = undefined;
  }
  if (fromShell && (await isExecutable(fromShell))) return commandFor(fromShell, 'login-shell');
  for (const dir of (env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    const candidate = path.join(dir, process.platform === 'win32' ? 'mdsearch.exe' : EXECUTABLE_NAME);
    if (await isExecutable(candidate)) return commandFor(candidate, 'path');
  }
  const common = commonLocations(home);
  for (const candidate of common) {
    if (await isExecutable(candidate)) return commandFor(candidate, 'common-location');
  }
  const shell = process.platform === 'win32' ? 'where' : env.SHELL || '/bin/sh';
  throw new ExecutableNotFoundError(
    `mdsearch: the mdsearch executable was not found (looked through the login shell ${shell}, PATH and ${common.join(', ')}). ${INSTALL_HINT}`,
  );
}

export type VersionCheck = { ok: true; version: string } | { ok: false; error: string };

/** The settings tab's Test button: runs `<command> --version` (or `python -m mdsearch_ls
 * --version`) and reports its answer or the exact failure. */
export function checkVersion(cmd: ServerCommand, timeoutMs = 30_000): Promise<VersionCheck> {
  const args = cmd.args.slice(0, -1).concat('--version');
  return new Promise((resolve) => {
    execFile(cmd.command, args, { timeout: timeoutMs, windowsHide: true }, (err, stdout, stderr) => {
      if (!err) {
        resolve({ ok: true, version: stdout.trim() || stderr.trim() });
        return;
      }
      const e = err as NodeJS.ErrnoException & { killed?: boolean };
      const last = stderr.trim().split(/\r?\n/).pop();
      if (e.code === 'ENOENT') resolve({ ok: false, error: `${cmd.command}: no such file` });
      else if (e.code === 'EACCES') resolve({ ok: false, error: `${cmd.command}: permission denied (not executable)` });
      else if (e.killed) resolve({ ok: false, error: `${cmd.command} did not answer within ${timeoutMs / 1000} s` });
      else resolve({ ok: false, error: `${[cmd.command, ...args].join(' ')} failed: ${last || e.message}` });
    });
  });
}
