import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type ExtensionLike, pythonExtensionInterpreter } from '../../src/python';

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
