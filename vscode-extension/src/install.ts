// Installing mdsearch into an environment of the extension's own (its global storage): with uv
// when uv is there (`uv venv`, `uv pip install`), else with the venv module of a Python 3.10 or
// newer it finds. The commands run with the editor's environment, so pip's and uv's own variables
// (PIP_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX, UV_INDEX_URL, UV_FIND_LINKS, UV_OFFLINE, ...) and
// their config files reach them: a company mirror, or a folder of wheels offline, works as it
// does in a terminal. Only type imports from `vscode`: the plans are unit-tested in plain Node.
import { execFile, spawn } from 'node:child_process';
import type { CancellationToken } from 'vscode';
import { envProgram } from './discovery';

export const MIN_PYTHON: readonly [number, number] = [3, 10];

export interface Step {
  command: string;
  args: string[];
}

/** The Pythons worth trying, in order: the launcher `py -3` on Windows, else python3, python. */
export function pythonCommands(platform: NodeJS.Platform): Step[] {
  return platform === 'win32'
    ? [{ command: 'py', args: ['-3'] }, { command: 'python', args: [] }]
    : [{ command: 'python3', args: [] }, { command: 'python', args: [] }];
}

/** Prints "major minor" then the interpreter's own path (so `py -3` becomes a path). */
export const VERSION_PROBE = 'import sys; print(*sys.version_info[:2]); print(sys.executable)';

/** The interpreter's path when the probe's output names a version new enough, else a reason. */
export function readProbe(stdout: string): { python: string } | { reason: string } {
  const [version = '', executable = ''] = stdout.trim().split(/\r?\n/);
  const [major = 0, minor = 0] = version.trim().split(/\s+/).map(Number);
  if (!executable.trim()) return { reason: 'did not say where it is' };
  if (major < MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor < MIN_PYTHON[1])) {
    return { reason: `is Python ${major}.${minor}; mdsearch needs ${MIN_PYTHON.join('.')} or newer` };
  }
  return { python: executable.trim() };
}

export type Run = (step: Step) => Promise<{ ok: boolean; stdout: string; detail: string }>;

/** The first Python new enough, or the reasons each candidate was not. */
export async function findPython(platform: NodeJS.Platform, run: Run): Promise<{ python?: string; reasons: string[] }> {
  const reasons: string[] = [];
  for (const c of pythonCommands(platform)) {
    const shown = [c.command, ...c.args].join(' ');
    const r = await run({ command: c.command, args: [...c.args, '-c', VERSION_PROBE] });
    if (!r.ok) {
      reasons.push(`${shown}: ${r.detail}`);
      continue;
    }
    const probe = readProbe(r.stdout);
    if ('python' in probe) return { python: probe.python, reasons };
    reasons.push(`${shown} ${probe.reason}`);
  }
  return { reasons };
}

export interface InstallOptions {
  platform: NodeJS.Platform;
  envDir: string;
  /** The PyPI package: mdsearch-ls. */
  pipPackage: string;
  /** uv's path, when found; it wins over `python`. */
  uv?: string;
  /** A Python new enough (findPython). */
  python?: string;
}

/** The commands that make the environment and install mdsearch into it. */
export function installSteps(o: InstallOptions): Step[] {
  const envPython = envProgram(o.envDir, o.platform, 'python');
  if (o.uv) {
    return [
      // uv finds a Python >= 3.10 itself (and fetches one, unless offline, when there is none)
      { command: o.uv, args: ['venv', '--python', `>=${MIN_PYTHON.join('.')}`, o.envDir] },
      { command: o.uv, args: ['pip', 'install', '--python', envPython, o.pipPackage] },
    ];
  }
  if (!o.python) throw new Error('installSteps: neither uv nor a Python');
  return [
    { command: o.python, args: ['-m', 'venv', o.envDir] },
    // --no-compile: as uv does, no bytecode for every file of every dependency up front (a
    // quarter of the time: 26 s against 80-106 s here); Python writes it for what it imports.
    { command: envPython, args: ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-compile', o.pipPackage] },
  ];
}

/** What *Copy install command* copies: an install that puts `mdsearch` on PATH for the terminal
 * too, by the tool installer at hand (pipx or uv both keep it in an environment of its own, as
 * Debian's, Ubuntu's and Homebrew's Pythons require). */
export function toolInstallCommand(pipPackage: string, uvFound: boolean): string {
  return uvFound ? `uv tool install ${pipPackage}` : `pipx install ${pipPackage}`;
}

/** One command for a person to read in the log. */
export function shown(step: Step): string {
  return [step.command, ...step.args].map((a) => (/^[\w@%+=:,./\\>-]+$/.test(a) ? a : JSON.stringify(a))).join(' ');
}

/** Runs a command to its end and returns its output (for short probes). */
export const runQuiet: Run = (step) =>
  new Promise((resolve) => {
    execFile(step.command, step.args, { timeout: 30_000, windowsHide: true }, (error, stdout, stderr) => {
      if (!error) {
        resolve({ ok: true, stdout, detail: '' });
        return;
      }
      const err = error as NodeJS.ErrnoException;
      const last = stderr.trim().split(/\r?\n/).pop();
      resolve({ ok: false, stdout, detail: err.code === 'ENOENT' ? 'not found' : last || err.message });
    });
  });

/** Runs the steps one after the other, every output line to `log`; the first that fails stops
 * the rest. Cancelling kills the running command. */
export async function runSteps(
  steps: readonly Step[],
  log: (line: string) => void,
  token?: CancellationToken,
): Promise<{ ok: true } | { ok: false; message: string }> {
  for (const step of steps) {
    log(`$ ${shown(step)}`);
    const code = await new Promise<number | string>((resolve) => {
      const child = spawn(step.command, step.args, { stdio: ['ignore', 'pipe', 'pipe'], windowsHide: true });
      const cancel = token?.onCancellationRequested(() => child.kill());
      let pending = '';
      const onData = (data: Buffer): void => {
        const lines = (pending + data.toString()).split(/\r?\n/);
        pending = lines.pop() ?? '';
        for (const line of lines) if (line.trim()) log(line);
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.on('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ENOENT' ? 'not found' : e.message));
      child.on('close', (status, signal) => {
        cancel?.dispose();
        if (pending.trim()) log(pending);
        resolve(status ?? `stopped by ${signal ?? 'a signal'}`);
      });
    });
    if (token?.isCancellationRequested) return { ok: false, message: 'cancelled' };
    if (code !== 0) {
      const why = typeof code === 'number' ? `exit code ${code}` : code;
      return { ok: false, message: `${shown(step)} failed (${why})` };
    }
  }
  return { ok: true };
}
