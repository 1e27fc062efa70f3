// Install mdsearch, for a user who has none: a private Python environment (privateEnvDir: the
// user's data folder, one for every vault on the device, never inside a vault) with the PyPI
// package mdsearch-ls in it. Made with uv when uv is found (seconds; it can bring its own Python),
// else with `python -m venv` of a Python 3.10+ it finds (`py -3` on Windows) and that
// environment's pip. The installers run in the plugin's environment as it is, so their own
// variables apply: PIP_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX (and pip.conf) for pip,
// UV_DEFAULT_INDEX, UV_FIND_LINKS, UV_OFFLINE (and uv.toml) for uv: a mirror or a folder of
// wheels works offline. No `obsidian` import: tested under Node against a real wheel folder.
import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import * as path from 'node:path';
import {
  commandFor,
  currentSystem,
  envScripts,
  type FileSystem,
  findProgram,
  installFolders,
  privateEnvDir,
  realFileSystem,
  type ServerCommand,
  type System,
} from './locate';

/** What is installed: the package a release publishes. */
export const PACKAGE = 'mdsearch-ls';
/** mdsearch-ls's requires-python. */
const MIN_PYTHON: [number, number] = [3, 10];

export interface InstallOptions {
  system?: System;
  fs?: FileSystem;
  /** Login-shell lookup (tests replace it). */
  shellLookup?: (name: string) => Promise<string | undefined>;
  /** Where the environment goes; privateEnvDir() unless a test says otherwise. */
  envDir?: string;
  /** Each step, as a sentence ("Creating the environment with uv"). */
  onStep?: (step: string) => void;
  /** Every line the installers print. */
  onLog?: (line: string) => void;
}

export class InstallError extends Error {
  override readonly name = 'InstallError';
}

/** Runs a program to its end, every output line to `onLog`; rejects with the last lines when it
 * fails. */
function run(command: string, args: string[], env: NodeJS.ProcessEnv, onLog: (line: string) => void): Promise<void> {
  onLog(`$ ${[command, ...args].join(' ')}`);
  return new Promise((resolve, reject) => {
    const tail: string[] = [];
    const child = spawn(command, args, { env, windowsHide: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const lines = (chunk: Buffer): void => {
      for (const line of chunk.toString('utf8').split(/\r?\n/)) {
        if (!line.trim()) continue;
        onLog(line);
        tail.push(line);
        if (tail.length > 8) tail.shift();
      }
    };
    child.stdout.on('data', lines);
    child.stderr.on('data', lines);
    child.once('error', (e) => reject(new InstallError(`cannot run ${command}: ${e.message}`)));
    child.once('close', (code) => {
      if (code === 0) resolve();
      else reject(new InstallError(`${path.basename(command)} ${args[0] ?? ''} failed (exit code ${String(code)}):\n${tail.join('\n')}`));
    });
  });
}

/** A Python's "3.12", and whether it can make a venv (Debian's python3 needs python3-venv). */
function probePython(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ version: [number, number]; venv: boolean } | undefined> {
  const code = "import sys, importlib.util as u; print('%d.%d %d' % (sys.version_info[0], sys.version_info[1], bool(u.find_spec('venv') and u.find_spec('ensurepip'))))";
  return new Promise((resolve) => {
    let out = '';
    const child = spawn(command, [...args, '-c', code], { env, windowsHide: true, stdio: ['ignore', 'pipe', 'ignore'] });
    const timer = window.setTimeout(() => child.kill(), 15_000);
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString('utf8');
    });
    child.once('error', () => resolve(undefined));
    child.once('close', (code) => {
      window.clearTimeout(timer);
      const m = /^(\d+)\.(\d+) ([01])/.exec(out.trim());
      resolve(code === 0 && m ? { version: [Number(m[1]), Number(m[2])], venv: m[3] === '1' } : undefined);
    });
  });
}

const newEnough = ([major, minor]: [number, number]): boolean => major > MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor >= MIN_PYTHON[1]);

/** A Python that can make the environment: `py -3` on Windows (the launcher picks the newest),
 * else the login shell's python3, then python3.X and python3 in PATH and the install folders. */
async function findPython(options: InstallOptions, system: System, fs: FileSystem): Promise<{ command: string; args: string[] }> {
  const candidates: { command: string; args: string[] }[] = [];
  if (system.platform === 'win32') candidates.push({ command: 'py', args: ['-3'] });
  const names = system.platform === 'win32'
    ? ['python']
    : ['python3', 'python3.14', 'python3.13', 'python3.12', 'python3.11', 'python3.10'];
  const found = await findProgram(names, { system, fs, shellLookup: options.shellLookup });
  if (found.path) candidates.push({ command: found.path, args: [] });
  const p = system.platform === 'win32' ? path.win32 : path.posix;
  for (const dir of [...(system.env.PATH ?? system.env.Path ?? '').split(p.delimiter).filter(Boolean), ...(await installFolders(system, fs))]) {
    for (const name of names) {
      const candidate = p.join(dir, system.platform === 'win32' ? `${name}.exe` : name);
      if (candidate !== found.path && (await fs.isExecutable(candidate))) candidates.push({ command: candidate, args: [] });
    }
  }
  const refused: string[] = [];
  for (const c of candidates) {
    const probe = await probePython(c.command, c.args, system.env);
    if (!probe) continue;
    const label = `${[c.command, ...c.args].join(' ')} (Python ${probe.version.join('.')})`;
    if (!newEnough(probe.version)) refused.push(`${label} is older than ${MIN_PYTHON.join('.')}`);
    else if (!probe.venv) refused.push(`${label} has no venv module (Debian and Ubuntu: sudo apt install python3-venv)`);
    else return c;
  }
  throw new InstallError(
    `No uv and no usable Python ${MIN_PYTHON.join('.')}+ was found${refused.length ? ` (${refused.join('; ')})` : ''}. ` +
    'Install uv (https://docs.astral.sh/uv/) or Python (https://www.python.org/downloads/), then install again.',
  );
}

/** Makes the private environment afresh (an earlier one is replaced: Install again updates),
 * installs mdsearch-ls, and returns how to start its server. The caller stops a server running
 * from it first (Windows keeps a running program's files). */
export async function installServer(options: InstallOptions = {}): Promise<ServerCommand> {
  const system = options.system ?? currentSystem();
  const fs = options.fs ?? realFileSystem;
  const envDir = options.envDir ?? privateEnvDir(system);
  const step = options.onStep ?? (() => undefined);
  const log = options.onLog ?? (() => undefined);
  const env = system.env;
  const scripts = envScripts(envDir, system.platform);
  const python = path.join(scripts, system.platform === 'win32' ? 'python.exe' : 'python');
  try {
    await fsp.rm(envDir, { recursive: true, force: true });
    await fsp.mkdir(path.dirname(envDir), { recursive: true });
  } catch (error) {
    // Windows keeps the files of a running program: another vault's server from this folder.
    throw new InstallError(`cannot replace ${envDir} (${error instanceof Error ? error.message : String(error)}): close the other vaults that use it, or restart Obsidian, then install again`);
  }
  const uv = (await findProgram(['uv'], { system, fs, shellLookup: options.shellLookup })).path;
  if (uv) {
    step(`Creating the environment with uv (${uv})`);
    // UV_PYTHON, when set, names the Python; else uv finds (or downloads) one new enough.
    await run(uv, ['venv', '--python', env.UV_PYTHON || `>=${MIN_PYTHON.join('.')}`, envDir], env, log);
    step(`Installing ${PACKAGE} with uv`);
    await run(uv, ['pip', 'install', '--python', python, PACKAGE], env, log);
  } else {
    const base = await findPython(options, system, fs);
    step(`Creating the environment with ${[base.command, ...base.args].join(' ')} -m venv`);
    await run(base.command, [...base.args, '-m', 'venv', envDir], env, log);
    step(`Installing ${PACKAGE} with pip`);
    await run(python, ['-m', 'pip', 'install', '--disable-pip-version-check', PACKAGE], env, log);
  }
  const exe = path.join(scripts, system.platform === 'win32' ? 'mdsearch.exe' : 'mdsearch');
  if (!(await fs.isExecutable(exe))) throw new InstallError(`${PACKAGE} was installed but ${exe} is not there`);
  step(`Installed in ${envDir}`);
  return commandFor(exe, 'private-install');
}
