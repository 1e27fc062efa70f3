// Where the `mdsearch` program is. Order: the `mdsearch.server.path` setting; `mdsearch` on PATH;
// the folders pipx and uv put their tools in (which a GUI-started editor's PATH often lacks); the
// environment the extension installed itself; the Python extension's interpreter when mdsearch is
// installed beside it. Pure: the file system, the environment and the probe are passed in, so the
// order is unit-tested for Windows, macOS and Linux on any machine.
import * as path from 'node:path';

/** What discovery needs from the machine. */
export interface Host {
  platform: NodeJS.Platform;
  env: Record<string, string | undefined>;
  home: string;
  /** Whether `file` is a file this user may run. */
  isExecutable(file: string): Promise<boolean>;
}

export type ServerSource = 'setting' | 'PATH' | 'tool folder' | 'installed by the extension' | 'Python extension';

export interface Found {
  path: string;
  source: ServerSource;
}

const pathsOf = (platform: NodeJS.Platform): path.PlatformPath => (platform === 'win32' ? path.win32 : path.posix);

/** An environment variable; on Windows their names ignore case (`Path`, `PATH`). */
export function getEnv(host: Pick<Host, 'env' | 'platform'>, name: string): string | undefined {
  if (host.platform !== 'win32') return host.env[name] || undefined;
  const key = Object.keys(host.env).find((k) => k.toUpperCase() === name.toUpperCase());
  return key === undefined ? undefined : host.env[key] || undefined;
}

/** `mdsearch` -> `mdsearch.exe` on Windows (pip, pipx and uv make .exe launchers there). */
export function exeName(platform: NodeJS.Platform, name: string): string {
  return platform === 'win32' ? `${name}.exe` : name;
}

/** A program inside a virtual environment: `<env>/bin/NAME`, or `<env>\Scripts\NAME.exe`. */
export function envProgram(envDir: string, platform: NodeJS.Platform, name: string): string {
  const p = pathsOf(platform);
  return platform === 'win32' ? p.join(envDir, 'Scripts', exeName(platform, name)) : p.join(envDir, 'bin', name);
}

/** The folders of PATH, in order. */
export function pathDirs(host: Pick<Host, 'env' | 'platform'>): string[] {
  const value = getEnv(host, 'PATH') ?? '';
  return value.split(host.platform === 'win32' ? ';' : ':').filter((d) => d.trim() !== '');
}

/** Where pipx and uv put the programs of the tools they install: their own variables first
 * (PIPX_BIN_DIR, UV_TOOL_BIN_DIR, XDG_BIN_HOME), then their shared default `~/.local/bin`
 * (`%USERPROFILE%\.local\bin` on Windows, where `home` is USERPROFILE). */
export function toolDirs(host: Pick<Host, 'env' | 'platform' | 'home'>): string[] {
  const p = pathsOf(host.platform);
  const dirs = ['PIPX_BIN_DIR', 'UV_TOOL_BIN_DIR', 'XDG_BIN_HOME'].map((v) => getEnv(host, v));
  dirs.push(p.join(host.home, '.local', 'bin'));
  return dirs.filter((d): d is string => d !== undefined);
}

/** A program's possible places, in order and without repeats: PATH, then the tool folders. */
export function programCandidates(host: Pick<Host, 'env' | 'platform' | 'home'>, name: string): Found[] {
  const p = pathsOf(host.platform);
  const file = exeName(host.platform, name);
  const seen = new Set<string>();
  const out: Found[] = [];
  const add = (dir: string, source: ServerSource): void => {
    const full = p.join(dir, file);
    const key = host.platform === 'win32' ? full.toLowerCase() : full;
    if (seen.has(key)) return;
    seen.add(key);
    out.push({ path: full, source });
  };
  for (const dir of pathDirs(host)) add(dir, 'PATH');
  for (const dir of toolDirs(host)) add(dir, 'tool folder');
  return out;
}

/** The first place that holds `name` and can run it. */
export async function findProgram(host: Host, name: string): Promise<string | undefined> {
  for (const c of programCandidates(host, name)) {
    if (await host.isExecutable(c.path)) return c.path;
  }
  return undefined;
}

/** `mdsearch` beside a Python interpreter: in its folder (a virtual environment's bin/ or
 * Scripts\), or in Scripts\ under a Windows installation's python.exe. */
export function besideInterpreter(python: string, platform: NodeJS.Platform): string[] {
  const p = pathsOf(platform);
  const dir = p.dirname(python);
  const file = exeName(platform, 'mdsearch');
  const out = [p.join(dir, file)];
  if (platform === 'win32' && p.basename(dir).toLowerCase() !== 'scripts') out.push(p.join(dir, 'Scripts', file));
  return out;
}

export interface ServerSources {
  /** `mdsearch.server.path`, expanded; when set it is the answer, whether it works or not. */
  setting: string | undefined;
  /** The extension's own environment (in its global storage). */
  envDir: string;
  /** The Python extension's interpreter; only asked when nothing else is found (asking may
   * activate that extension). */
  pythonInterpreter: () => Promise<string | undefined>;
  /** Whether a found file is mdsearch (it answers `--version`); a stale launcher of a removed
   * environment is passed over. */
  answers: (program: string) => Promise<boolean>;
  /** Told about each file found that did not answer. */
  skipped?: (program: string) => void;
}

/** The mdsearch program to run as `<path> serve`, or undefined when there is none. */
export async function findServer(host: Host, sources: ServerSources): Promise<Found | undefined> {
  if (sources.setting) return { path: sources.setting, source: 'setting' };
  const works = async (c: Found): Promise<boolean> => {
    if (!(await host.isExecutable(c.path))) return false;
    if (await sources.answers(c.path)) return true;
    sources.skipped?.(c.path);
    return false;
  };
  const installed: Found = { path: envProgram(sources.envDir, host.platform, 'mdsearch'), source: 'installed by the extension' };
  for (const c of [...programCandidates(host, 'mdsearch'), installed]) {
    if (await works(c)) return c;
  }
  let python: string | undefined;
  try {
    python = await sources.pythonInterpreter();
  } catch {
    python = undefined; // a broken Python extension is no reason not to offer the install
  }
  for (const file of python ? besideInterpreter(python, host.platform) : []) {
    const c: Found = { path: file, source: 'Python extension' };
    if (await works(c)) return c;
  }
  return undefined;
}
