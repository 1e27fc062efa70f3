import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  besideInterpreter,
  envProgram,
  findProgram,
  findServer,
  type Host,
  pathDirs,
  type ServerSources,
  toolDirs,
} from '../../src/discovery';

/** A machine with these runnable files (paths compared as the platform does). */
function host(platform: NodeJS.Platform, home: string, env: Record<string, string>, files: string[]): Host & { asked: string[] } {
  const norm = (p: string): string => (platform === 'win32' ? p.toLowerCase() : p);
  const have = new Set(files.map(norm));
  const asked: string[] = [];
  return {
    platform,
    home,
    env,
    asked,
    isExecutable: (file) => {
      asked.push(file);
      return Promise.resolve(have.has(norm(file)));
    },
  };
}

const sources = (over: Partial<ServerSources> = {}): ServerSources => ({
  setting: undefined,
  envDir: over.envDir ?? '/storage/env',
  pythonInterpreter: () => Promise.resolve(undefined),
  answers: () => Promise.resolve(true),
  ...over,
});

const WIN_HOME = 'C:\\Users\\Ada';
const WIN_ENV = {
  Path: 'C:\\Windows\\system32;C:\\Program Files\\Git\\cmd',
  PATHEXT: '.COM;.EXE;.BAT;.CMD',
};

describe('findServer on Linux', () => {
  const env = { PATH: '/usr/local/bin:/usr/bin:/bin' };

  it('takes the setting as it is, without looking further or probing it', async () => {
    const h = host('linux', '/home/ada', env, ['/usr/bin/mdsearch']);
    const found = await findServer(h, sources({ setting: '/opt/md/bin/mdsearch', answers: () => Promise.reject(new Error('not asked')) }));
    assert.deepEqual(found, { path: '/opt/md/bin/mdsearch', source: 'setting' });
    assert.deepEqual(h.asked, []);
  });

  it('finds mdsearch on PATH, in PATH order', async () => {
    const h = host('linux', '/home/ada', env, ['/usr/bin/mdsearch', '/bin/mdsearch', '/home/ada/.local/bin/mdsearch']);
    assert.deepEqual(await findServer(h, sources()), { path: '/usr/bin/mdsearch', source: 'PATH' });
  });

  it("then pipx's and uv's folder ~/.local/bin, which a desktop-started editor's PATH often lacks", async () => {
    const h = host('linux', '/home/ada', env, ['/home/ada/.local/bin/mdsearch', '/storage/env/bin/mdsearch']);
    assert.deepEqual(await findServer(h, sources()), { path: '/home/ada/.local/bin/mdsearch', source: 'tool folder' });
  });

  it('honours PIPX_BIN_DIR, UV_TOOL_BIN_DIR and XDG_BIN_HOME before ~/.local/bin', async () => {
    const dirs = { PIPX_BIN_DIR: '/pipx/bin', UV_TOOL_BIN_DIR: '/uv/bin', XDG_BIN_HOME: '/xdg/bin' };
    assert.deepEqual(toolDirs({ platform: 'linux', home: '/home/ada', env: dirs }), ['/pipx/bin', '/uv/bin', '/xdg/bin', '/home/ada/.local/bin']);
    const h = host('linux', '/home/ada', { ...env, ...dirs }, ['/uv/bin/mdsearch', '/home/ada/.local/bin/mdsearch']);
    assert.deepEqual(await findServer(h, sources()), { path: '/uv/bin/mdsearch', source: 'tool folder' });
  });

  it("then the extension's own environment", async () => {
    const h = host('linux', '/home/ada', env, ['/storage/env/bin/mdsearch']);
    assert.deepEqual(await findServer(h, sources()), { path: '/storage/env/bin/mdsearch', source: 'installed by the extension' });
  });

  it("then mdsearch beside the Python extension's interpreter, asking that extension last", async () => {
    let askedPython = 0;
    const pythonInterpreter = (): Promise<string> => {
      askedPython += 1;
      return Promise.resolve('/home/ada/notes/.venv/bin/python');
    };
    const h = host('linux', '/home/ada', env, ['/home/ada/notes/.venv/bin/mdsearch']);
    assert.deepEqual(await findServer(h, sources({ pythonInterpreter })), { path: '/home/ada/notes/.venv/bin/mdsearch', source: 'Python extension' });
    assert.equal(askedPython, 1);
    const onPath = host('linux', '/home/ada', env, ['/usr/bin/mdsearch']);
    await findServer(onPath, sources({ pythonInterpreter }));
    assert.equal(askedPython, 1, 'not asked when mdsearch is on PATH');
  });

  it('is undefined when there is none, or the Python extension fails', async () => {
    const h = host('linux', '/home/ada', env, ['/usr/bin/python3']);
    assert.equal(await findServer(h, sources({ pythonInterpreter: () => Promise.reject(new Error('broken')) })), undefined);
  });

  it("passes over a file that does not answer as mdsearch (a removed environment's launcher)", async () => {
    const h = host('linux', '/home/ada', env, ['/usr/local/bin/mdsearch', '/home/ada/.local/bin/mdsearch']);
    const skipped: string[] = [];
    const found = await findServer(h, sources({
      answers: (p) => Promise.resolve(p !== '/usr/local/bin/mdsearch'),
      skipped: (p) => skipped.push(p),
    }));
    assert.deepEqual(found, { path: '/home/ada/.local/bin/mdsearch', source: 'tool folder' });
    assert.deepEqual(skipped, ['/usr/local/bin/mdsearch']);
  });

  it('looks in a folder on PATH and in the tool folders once', async () => {
    const h = host('linux', '/home/ada', { PATH: '/home/ada/.local/bin:/usr/bin' }, []);
    await findServer(h, sources());
    assert.deepEqual(h.asked, ['/home/ada/.local/bin/mdsearch', '/usr/bin/mdsearch', '/storage/env/bin/mdsearch']);
  });
});

describe('findServer on macOS', () => {
  it('reads PATH and ~/.local/bin as on Linux (pipx and uv use it there too)', async () => {
    const env = { PATH: '/opt/homebrew/bin:/usr/bin:/bin' };
    const h = host('darwin', '/Users/ada', env, ['/Users/ada/.local/bin/mdsearch']);
    assert.deepEqual(await findServer(h, sources({ envDir: '/Users/ada/Library/Application Support/Code/User/globalStorage/mdsearch.mdsearch/env' })), {
      path: '/Users/ada/.local/bin/mdsearch',
      source: 'tool folder',
    });
    const brew = host('darwin', '/Users/ada', env, ['/opt/homebrew/bin/mdsearch', '/Users/ada/.local/bin/mdsearch']);
    assert.equal((await findServer(brew, sources()))?.path, '/opt/homebrew/bin/mdsearch');
  });
});

describe('findServer on Windows', () => {
  it('splits Path (any case) at semicolons and looks for mdsearch.exe', () => {
    assert.deepEqual(pathDirs({ platform: 'win32', env: WIN_ENV }), ['C:\\Windows\\system32', 'C:\\Program Files\\Git\\cmd']);
  });

  it('finds mdsearch.exe in %USERPROFILE%\\.local\\bin (pipx and uv)', async () => {
    const h = host('win32', WIN_HOME, WIN_ENV, ['C:\\Users\\Ada\\.local\\bin\\mdsearch.exe']);
    assert.deepEqual(await findServer(h, sources({ envDir: 'C:\\Users\\Ada\\AppData\\Roaming\\Code\\User\\globalStorage\\mdsearch.mdsearch\\env' })), {
      path: 'C:\\Users\\Ada\\.local\\bin\\mdsearch.exe',
      source: 'tool folder',
    });
  });

  it('takes PIPX_BIN_DIR whatever the case of its name, and compares paths without case', async () => {
    const env = { ...WIN_ENV, pipx_bin_dir: 'D:\\Tools' };
    const h = host('win32', WIN_HOME, env, ['d:\\tools\\MDSEARCH.EXE']);
    assert.equal((await findServer(h, sources({ envDir: 'C:\\env' })))?.path, 'D:\\Tools\\mdsearch.exe');
  });

  it("finds the extension's environment in Scripts\\", async () => {
    const envDir = 'C:\\Users\\Ada\\AppData\\Roaming\\Code\\User\\globalStorage\\mdsearch.mdsearch\\env';
    assert.equal(envProgram(envDir, 'win32', 'mdsearch'), `${envDir}\\Scripts\\mdsearch.exe`);
    const h = host('win32', WIN_HOME, WIN_ENV, [`${envDir}\\Scripts\\mdsearch.exe`]);
    assert.deepEqual(await findServer(h, sources({ envDir })), { path: `${envDir}\\Scripts\\mdsearch.exe`, source: 'installed by the extension' });
  });

  it("finds mdsearch.exe beside a venv's python.exe, or in Scripts\\ of an installation", async () => {
    assert.deepEqual(besideInterpreter('C:\\notes\\.venv\\Scripts\\python.exe', 'win32'), ['C:\\notes\\.venv\\Scripts\\mdsearch.exe']);
    assert.deepEqual(besideInterpreter('C:\\Python312\\python.exe', 'win32'), ['C:\\Python312\\mdsearch.exe', 'C:\\Python312\\Scripts\\mdsearch.exe']);
    const h = host('win32', WIN_HOME, WIN_ENV, ['C:\\Python312\\Scripts\\mdsearch.exe']);
    const found = await findServer(h, sources({ envDir: 'C:\\env', pythonInterpreter: () => Promise.resolve('C:\\Python312\\python.exe') }));
    assert.deepEqual(found, { path: 'C:\\Python312\\Scripts\\mdsearch.exe', source: 'Python extension' });
  });
});

describe('findProgram', () => {
  it('finds uv on PATH or in the tool folders, uv.exe on Windows', async () => {
    assert.equal(await findProgram(host('linux', '/home/ada', { PATH: '/usr/bin' }, ['/home/ada/.local/bin/uv']), 'uv'), '/home/ada/.local/bin/uv');
    assert.equal(await findProgram(host('win32', WIN_HOME, WIN_ENV, ['C:\\Program Files\\Git\\cmd\\uv.exe']), 'uv'), 'C:\\Program Files\\Git\\cmd\\uv.exe');
    assert.equal(await findProgram(host('darwin', '/Users/ada', { PATH: '/usr/bin' }, []), 'uv'), undefined);
  });
});
