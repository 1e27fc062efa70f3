import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, it } from 'node:test';
import {
  findPython,
  installSteps,
  pythonCommands,
  readProbe,
  type Run,
  runQuiet,
  runSteps,
  type Step,
  toolInstallCommand,
  VERSION_PROBE,
} from '../../src/install';

describe('installSteps', () => {
  it('with uv on Linux and macOS: uv venv for Python 3.10+, then uv pip install into it', () => {
    for (const platform of ['linux', 'darwin'] as const) {
      assert.deepEqual(installSteps({ platform, envDir: '/storage/env', pipPackage: 'mdsearch-ls', uv: '/home/ada/.local/bin/uv', python: '/usr/bin/python3' }), [
        { command: '/home/ada/.local/bin/uv', args: ['venv', '--python', '>=3.10', '/storage/env'] },
        { command: '/home/ada/.local/bin/uv', args: ['pip', 'install', '--python', '/storage/env/bin/python', 'mdsearch-ls'] },
      ]);
    }
  });

  it("with uv on Windows: the environment's Scripts\\python.exe", () => {
    const envDir = 'C:\\Users\\Ada\\AppData\\Roaming\\Code\\User\\globalStorage\\mdsearch.mdsearch\\env';
    assert.deepEqual(installSteps({ platform: 'win32', envDir, pipPackage: 'mdsearch-ls', uv: 'C:\\Users\\Ada\\.local\\bin\\uv.exe' }), [
      { command: 'C:\\Users\\Ada\\.local\\bin\\uv.exe', args: ['venv', '--python', '>=3.10', envDir] },
      { command: 'C:\\Users\\Ada\\.local\\bin\\uv.exe', args: ['pip', 'install', '--python', `${envDir}\\Scripts\\python.exe`, 'mdsearch-ls'] },
    ]);
  });

  it("without uv: the found Python's venv, then the environment's own pip", () => {
    assert.deepEqual(installSteps({ platform: 'linux', envDir: '/storage/env', pipPackage: 'mdsearch-ls', python: '/usr/bin/python3.12' }), [
      { command: '/usr/bin/python3.12', args: ['-m', 'venv', '/storage/env'] },
      { command: '/storage/env/bin/python', args: ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-compile', 'mdsearch-ls'] },
    ]);
    assert.deepEqual(installSteps({ platform: 'win32', envDir: 'C:\\env', pipPackage: 'mdsearch-ls', python: 'C:\\Python312\\python.exe' }), [
      { command: 'C:\\Python312\\python.exe', args: ['-m', 'venv', 'C:\\env'] },
      { command: 'C:\\env\\Scripts\\python.exe', args: ['-m', 'pip', 'install', '--disable-pip-version-check', '--no-compile', 'mdsearch-ls'] },
    ]);
  });

  it('needs uv or a Python', () => {
    assert.throws(() => installSteps({ platform: 'linux', envDir: '/e', pipPackage: 'mdsearch-ls' }), /neither uv nor a Python/);
  });
});

describe('findPython', () => {
  it('tries py -3 then python on Windows, python3 then python elsewhere', () => {
    assert.deepEqual(pythonCommands('win32'), [{ command: 'py', args: ['-3'] }, { command: 'python', args: [] }]);
    assert.deepEqual(pythonCommands('darwin'), [{ command: 'python3', args: [] }, { command: 'python', args: [] }]);
    assert.deepEqual(pythonCommands('linux'), [{ command: 'python3', args: [] }, { command: 'python', args: [] }]);
  });

  it("takes the first new enough, by the path it gives for itself", async () => {
    const seen: Step[] = [];
    const run: Run = (step) => {
      seen.push(step);
      if (step.command === 'python3') return Promise.resolve({ ok: true, stdout: '3 9\n/usr/bin/python3\n', detail: '' });
      return Promise.resolve({ ok: true, stdout: '3 12\r\n/opt/py/bin/python\r\n', detail: '' });
    };
    const found = await findPython('linux', run);
    assert.equal(found.python, '/opt/py/bin/python');
    assert.deepEqual(found.reasons, ['python3 is Python 3.9; mdsearch needs 3.10 or newer']);
    assert.deepEqual(seen[0], { command: 'python3', args: ['-c', VERSION_PROBE] });
  });

  it("asks the Windows launcher for Python 3 and says why none was taken", async () => {
    const run: Run = (step) => Promise.resolve(step.command === 'py'
      ? { ok: false, stdout: '', detail: 'not found' }
      : { ok: true, stdout: '3 8\nC:\\Python38\\python.exe\n', detail: '' });
    const found = await findPython('win32', run);
    assert.equal(found.python, undefined);
    assert.deepEqual(found.reasons, ['py -3: not found', 'python is Python 3.8; mdsearch needs 3.10 or newer']);
  });

  it('reads the probe of a real Python', async () => {
    const r = await runQuiet({ command: process.env.MDSEARCH_TEST_PYTHON ?? 'python3', args: ['-c', VERSION_PROBE] });
    assert.ok(r.ok, r.detail);
    const probe = readProbe(r.stdout);
    assert.ok('python' in probe && path.isAbsolute(probe.python), JSON.stringify(probe));
  });
});

describe('toolInstallCommand', () => {
  it('names the tool installer that puts mdsearch on PATH in an environment of its own', () => {
    assert.equal(toolInstallCommand('mdsearch-ls', true), 'uv tool install mdsearch-ls');
    assert.equal(toolInstallCommand('mdsearch-ls', false), 'pipx install mdsearch-ls');
  });
});

describe('runSteps', () => {
  it('logs every line of each command and stops at the first failure', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mdsearch-steps-'));
    const lines: string[] = [];
    const node = process.execPath;
    const result = await runSteps([
      { command: node, args: ['-e', 'console.log("one"); console.error("two")'] },
      { command: node, args: ['-e', 'process.exit(3)'] },
      { command: node, args: ['-e', `require("fs").writeFileSync(${JSON.stringify(path.join(dir, 'ran'))}, "")`] },
    ], (l) => lines.push(l));
    assert.equal(result.ok, false);
    assert.match(result.ok ? '' : result.message, /failed \(exit code 3\)/);
    assert.ok(lines.includes('one') && lines.includes('two'), lines.join('\n'));
    assert.equal(fs.existsSync(path.join(dir, 'ran')), false);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('says when a program is not there', async () => {
    const result = await runSteps([{ command: '/nonexistent/uv', args: ['venv'] }], () => undefined);
    assert.deepEqual(result, { ok: false, message: '/nonexistent/uv venv failed (not found)' });
  });
});
