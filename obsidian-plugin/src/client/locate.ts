// Finding the `mdsearch` executable. GUI apps start with a minimal PATH (launchd on macOS, a
// desktop file on Linux), so an empty setting is looked up the way a terminal would find it:
// through the user's login shell, then in PATH, then in the folders pip, pipx, uv and Homebrew
// install to, and last in the private environment the plugin's Install makes. The system (its
// kind, environment, home) and the file system are parameters, so each system's places are
// tested on any machine.
import { execFile } from 'node:child_process';
import { constants as fsConstants, promises as fsp } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export const EXECUTABLE_NAME = 'mdsearch';

/** How the server is started: `mdsearch serve`, or `<python> -m mdsearch_ls serve` when the
 * setting names a Python that has the package. */
export interface ServerCommand {
  command: string;
  args: string[];
  /** Where the path came from, for the settings tab and the logs. */
  source: 'setting' | 'login-shell' | 'path' | 'install-folder' | 'private-install';
}

/** The system whose places are searched: the running one unless a test says otherwise. */
export interface System {
  platform: NodeJS.Platform;
  env: NodeJS.ProcessEnv;
  home: string;
}

export function currentSystem(): System {
  return { platform: process.platform, env: process.env, home: os.homedir() };
}

/** What the lookup asks of the file system. */
export interface FileSystem {
  /** A file that can be run (on Windows: that exists). */
  isExecutable(file: string): Promise<boolean>;
  /** The names in a folder; none when it is missing. */
  list(dir: string): Promise<string[]>;
}

export const realFileSystem: FileSystem = {
  async isExecutable(file) {
    try {
      const stat = await fsp.stat(file);
      if (!stat.isFile()) return false;
      if (process.platform === 'win32') return true;
      await fsp.access(file, fsConstants.X_OK);
      return true;
    } catch {
      return false;
    }
  },
  async list(dir) {
    try {
      return await fsp.readdir(dir);
    } catch {
      return [];
    }
  },
};

export const INSTALL_HINT =
  'Install it with the Install button in Settings → mdsearch (a private copy for this plugin), or yourself with ' +
  '`pipx install mdsearch-ls` or `uv tool install mdsearch-ls`; or set the path of an `mdsearch` executable there.';

/** The executable is missing or unusable: shown once, never retried on a timer. */
export class ExecutableNotFoundError extends Error {
  override readonly name = 'ExecutableNotFoundError';
}

const pathFor = (platform: NodeJS.Platform): path.PlatformPath => (platform === 'win32' ? path.win32 : path.posix);

function executableName(platform: NodeJS.Platform): string {
  return platform === 'win32' ? `${EXECUTABLE_NAME}.exe` : EXECUTABLE_NAME;
}

export function isPython(file: string): boolean {
  return /^python(\d+(\.\d+)*)?(\.exe)?$/i.test(path.win32.basename(file));
}

export function commandFor(executable: string, source: ServerCommand['source']): ServerCommand {
  return isPython(executable)
    ? { command: executable, args: ['-m', 'mdsearch_ls', 'serve'], source }
    : { command: executable, args: ['serve'], source };
}

export function expandHome(value: string, home: string = os.homedir(), platform: NodeJS.Platform = process.platform): string {
  const v = value.trim();
  if (v === '~') return home;
  if (v.startsWith('~/') || v.startsWith('~\\')) return pathFor(platform).join(home, v.slice(2));
  return v;
}

/** The private environment the plugin's Install makes, in the user's data folder (not in the
 * vault, where Sync, iCloud or git would carry hundreds of MB of one machine's binaries; one for
 * every vault on this device): Windows `%LOCALAPPDATA%\mdsearch\obsidian-env` (Local, not
 * Roaming: it is built for this machine), macOS `~/Library/Application Support/mdsearch/
 * obsidian-env`, Linux `$XDG_DATA_HOME/mdsearch/obsidian-env` (`~/.local/share`). */
export function privateEnvDir(system: System = currentSystem()): string {
  const p = pathFor(system.platform);
  const { env, home } = system;
  if (system.platform === 'win32') return p.join(env.LOCALAPPDATA || p.join(home, 'AppData', 'Local'), 'mdsearch', 'obsidian-env');
  if (system.platform === 'darwin') return p.join(home, 'Library', 'Application Support', 'mdsearch', 'obsidian-env');
  return p.join(env.XDG_DATA_HOME || p.join(home, '.local', 'share'), 'mdsearch', 'obsidian-env');
}

/** A virtual environment's folder of programs. */
export function envScripts(envDir: string, platform: NodeJS.Platform): string {
  return pathFor(platform).join(envDir, platform === 'win32' ? 'Scripts' : 'bin');
}

/** Python version folders under `dir` ("Python312", "3.12"), newest first. */
async function versionFolders(dir: string, pattern: RegExp, fs: FileSystem): Promise<string[]> {
  const named = (await fs.list(dir)).map((name) => ({ name, m: pattern.exec(name) })).filter((e) => e.m);
  named.sort((a, b) => Number(b.m?.[1]) - Number(a.m?.[1]));
  return named.map((e) => e.name);
}

/** Folders installers put console scripts in, in the order they are tried after the login shell
 * and PATH: pipx's (PIPX_BIN_DIR, else ~/.local/bin) and uv's (UV_TOOL_BIN_DIR, else
 * XDG_BIN_HOME, else ~/.local/bin) on every system; pip --user's (Windows
 * %APPDATA%\Python\Python3XY\Scripts, macOS ~/Library/Python/3.X/bin, Linux ~/.local/bin); a
 * python.org Python's own Scripts on Windows; Homebrew's on macOS. */
export async function installFolders(system: System, fs: FileSystem = realFileSystem): Promise<string[]> {
  const p = pathFor(system.platform);
  const { env, home } = system;
  const localBin = p.join(home, '.local', 'bin');
  const out = [env.PIPX_BIN_DIR || localBin, env.UV_TOOL_BIN_DIR || env.XDG_BIN_HOME || localBin];
  if (system.platform === 'win32') {
    const roaming = p.join(env.APPDATA || p.join(home, 'AppData', 'Roaming'), 'Python');
    for (const v of await versionFolders(roaming, /^Python3(\d+)$/i, fs)) out.push(p.join(roaming, v, 'Scripts'));
    const programs = p.join(env.LOCALAPPDATA || p.join(home, 'AppData', 'Local'), 'Programs', 'Python');
    for (const v of await versionFolders(programs, /^Python3(\d+)$/i, fs)) out.push(p.join(programs, v, 'Scripts'));
  } else if (system.platform === 'darwin') {
    out.push('/opt/homebrew/bin', '/usr/local/bin');
    const user = p.join(home, 'Library', 'Python');
    for (const v of await versionFolders(user, /^3\.(\d+)$/, fs)) out.push(p.join(user, v, 'bin'));
  } else {
    out.push('/usr/local/bin');
  }
  return [...new Set(out)];
}

export interface LocateOptions {
  /** The per-device setting; empty means "find it". */
  setting: string;
  system?: System;
  fs?: FileSystem;
  /** Login-shell lookup; replaced in tests. Resolves the path or undefined. */
  shellLookup?: (name: string) => Promise<string | undefined>;
}

const MARK = '__MDSEARCH_PATH__';

/** `command -v <name>` in the user's login (and interactive: zsh users set PATH in .zshrc)
 * shell, with markers around the answer because rc files may print. 5 s at most. None on
 * Windows, where an app gets the user's whole PATH. */
export function loginShellLookup(name: string, env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  if (process.platform === 'win32') return Promise.resolve(undefined);
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

/** The server command for this device, or ExecutableNotFoundError saying where it looked and how
 * to install. A setting is taken as it is (a missing file is an error, not a reason to guess). */
export async function locateServer(options: LocateOptions): Promise<ServerCommand> {
  const system = options.system ?? currentSystem();
  const fs = options.fs ?? realFileSystem;
  const p = pathFor(system.platform);
  const setting = expandHome(options.setting, system.home, system.platform);
  if (setting) {
    if (!p.isAbsolute(setting)) {
      throw new ExecutableNotFoundError(`The mdsearch executable setting "${setting}" is not an absolute path. Use the full path (for example ${p.join(system.home, '.local', 'bin', executableName(system.platform))}), or leave it empty to look it up.`);
    }
    if (!(await fs.isExecutable(setting))) {
      throw new ExecutableNotFoundError(`"${setting}" (from the mdsearch executable setting) does not exist or is not executable. ${INSTALL_HINT}`);
    }
    return commandFor(setting, 'setting');
  }
  const found = await findProgram([EXECUTABLE_NAME], { ...options, system, fs }, [envScripts(privateEnvDir(system), system.platform)]);
  if (found.path) return commandFor(found.path, found.source ?? 'path');
  const looked = system.platform === 'win32' ? 'PATH' : `the login shell ${system.env.SHELL || '/bin/sh'}, PATH`;
  throw new ExecutableNotFoundError(
    `mdsearch was not found on this device (looked through ${looked} and ${found.folders.join(', ')}). ${INSTALL_HINT}`,
  );
}

export interface FoundProgram {
  path?: string;
  source?: ServerCommand['source'];
  /** The folders searched besides PATH, for a message that says where it looked. */
  folders: string[];
}

/** A program as a terminal would find it: the first of `names` in the login shell (macOS and
 * Linux), then each name in each folder of PATH, then of the install folders, then of `last`
 * (the private install). On Windows each name gets `.exe`. */
export async function findProgram(names: string[], options: Omit<LocateOptions, 'setting'>, last: string[] = []): Promise<FoundProgram> {
  const system = options.system ?? currentSystem();
  const fs = options.fs ?? realFileSystem;
  const p = pathFor(system.platform);
  const folders = [...(await installFolders(system, fs)), ...last];
  const first = names[0];
  if (first !== undefined) {
    const lookup = options.shellLookup ?? ((name: string) => loginShellLookup(name, system.env));
    const fromShell = await lookup(first).catch(() => undefined);
    if (fromShell && (await fs.isExecutable(fromShell))) return { path: fromShell, source: 'login-shell', folders };
  }
  const dirs: [string, ServerCommand['source']][] = [
    ...(system.env.PATH ?? system.env.Path ?? '').split(p.delimiter).filter(Boolean).map((d): [string, ServerCommand['source']] => [d, 'path']),
    ...folders.map((d): [string, ServerCommand['source']] => [d, last.includes(d) ? 'private-install' : 'install-folder']),
  ];
  for (const [dir, source] of dirs) {
    for (const name of names) {
      const candidate = p.join(dir, system.platform === 'win32' ? `${name}.exe` : name);
      if (await fs.isExecutable(candidate)) return { path: candidate, source, folders };
    }
  }
  return { folders };
}

export type VersionCheck = { ok: true; version: string } | { ok: false; error: string };

/** `<command> --version` (or `python -m mdsearch_ls --version`): its answer or the exact failure. */
export function checkVersion(cmd: ServerCommand, timeoutMs = 30_000, env: NodeJS.ProcessEnv = process.env): Promise<VersionCheck> {
  const args = cmd.args.slice(0, -1).concat('--version');
  return new Promise((resolve) => {
    execFile(cmd.command, args, { timeout: timeoutMs, windowsHide: true, env }, (err, stdout, stderr) => {
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
