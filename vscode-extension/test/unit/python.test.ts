import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  checkImportable,
  DEFAULT_PYTHON,
  type ExtensionLike,
  importErrorMessage,
  installCommand,
  pythonExtensionInterpreter,
  resolveInterpreter,
  serverCommand,
  shellQuote,
} from '../../src/python';

const never = (): Promise<string | undefined> => {
  throw new Error('must not be asked');
};

describe('resolveInterpreter', () => {
  it('prefers mdsearch.server.pythonPath over everything', async () => {
    assert.deepEqual(await resolveInterpreter({ setting: '/venv/bin/python', pythonExtension: never }), {
      path: '/venv/bin/python',
      source: 'setting',
    });
  });

  it('then asks the Python extension', async () => {
    const got = await resolveInterpreter({ setting: undefined, pythonExtension: () => Promise.resolve('/usr/bin/python3.12') });
    assert.deepEqual(got, { path: '/usr/bin/python3.12', source: 'python-extension' });
  });

  it('falls back to python3 when the Python extension has nothing', async () => {
    const got = await resolveInterpreter({ setting: undefined, pythonExtension: () => Promise.resolve(undefined) });
    assert.deepEqual(got, { path: DEFAULT_PYTHON, source: 'default' });
  });

  it('falls back when the Python extension throws', async () => {
    const got = await resolveInterpreter({
      setting: undefined,
      pythonExtension: () => Promise.reject(new Error('api broken')),
      fallback: 'py',
    });
    assert.deepEqual(got, { path: 'py', source: 'default' });
  });

  it('treats an empty setting as unset', async () => {
    const got = await resolveInterpreter({ setting: '', pythonExtension: () => Promise.resolve('/x/python') });
    assert.equal(got.source, 'python-extension');
  });
});

/** A fake ms-python.python extension exposing the environments API. */
function fakePythonExtension(exports: unknown, active = false): ExtensionLike & { activated: number } {
  const ext = {
    isActive: active,
    exports,
    activated: 0,
    activate() {
      ext.activated += 1;
      ext.isActive = true;
      return Promise.resolve(exports);
    },
  };
  return ext;
}

describe('pythonExtensionInterpreter', () => {
  const api = (fsPath: string | undefined, path = '/envs/x') => ({
    getActiveEnvironmentPath: () => ({ id: 'x', path }),
    resolveEnvironment: () => Promise.resolve(fsPath ? { executable: { uri: { fsPath } } } : undefined),
  });

  it('is undefined without the extension', async () => {
    assert.equal(await pythonExtensionInterpreter(undefined), undefined);
  });

  it('activates the extension and returns the resolved executable', async () => {
    const ext = fakePythonExtension({ environments: api('/envs/x/bin/python') });
    assert.equal(await pythonExtensionInterpreter(ext), '/envs/x/bin/python');
    assert.equal(ext.activated, 1);
  });

  it('supports the older `environment` API name', async () => {
    const ext = fakePythonExtension({ environment: api('/old/bin/python') }, true);
    assert.equal(await pythonExtensionInterpreter(ext), '/old/bin/python');
    assert.equal(ext.activated, 0);
  });

  it('uses the environment path when it cannot be resolved', async () => {
    const ext = fakePythonExtension({ environments: api(undefined, '/usr/bin/python3') }, true);
    assert.equal(await pythonExtensionInterpreter(ext), '/usr/bin/python3');
  });

  it('is undefined when the exports are not the expected API', async () => {
    assert.equal(await pythonExtensionInterpreter(fakePythonExtension({ something: 1 })), undefined);
    assert.equal(await pythonExtensionInterpreter(fakePythonExtension(undefined)), undefined);
  });
});

describe('server command and install hint', () => {
  it('runs the module with serve', () => {
    assert.deepEqual(serverCommand('/venv/bin/python', 'mdsearch_ls'), {
      command: '/venv/bin/python',
      args: ['-m', 'mdsearch_ls', 'serve'],
    });
  });
  it('quotes paths with spaces in the copyable install command', () => {
    if (process.platform === 'win32') return;
    assert.equal(installCommand('/usr/bin/python3', 'mdsearch-ls'), '/usr/bin/python3 -m pip install mdsearch-ls');
    assert.equal(installCommand('/My Envs/bin/python', 'mdsearch-ls'), `'/My Envs/bin/python' -m pip install mdsearch-ls`);
    assert.equal(shellQuote("it's"), `'it'\\''s'`);
  });
});

describe('checkImportable', () => {
  const python = process.env.MDSEARCH_TEST_PYTHON ?? 'python3';

  it('reports success with the module version', async () => {
    const got = await checkImportable(python, 'json');
    assert.equal(got.ok, true);
  });

  it('reports a missing module with the last line of the traceback', async () => {
    const got = await checkImportable(python, 'mdsearch_definitely_not_installed');
    assert.equal(got.ok, false);
    if (got.ok) return;
    assert.equal(got.reason, 'not-importable');
    assert.match(got.detail, /ModuleNotFoundError/);
    assert.match(importErrorMessage(python, 'mdsearch_definitely_not_installed', got), /is not installed for/);
  });

  it('reports an interpreter that does not exist', async () => {
    const got = await checkImportable('/nonexistent/bin/python', 'json');
    assert.equal(got.ok, false);
    if (got.ok) return;
    assert.equal(got.reason, 'not-found');
    assert.match(importErrorMessage('/nonexistent/bin/python', 'json', got), /mdsearch.server.pythonPath/);
  });
});
