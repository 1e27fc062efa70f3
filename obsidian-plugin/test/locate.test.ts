// Where an empty setting finds `mdsearch` on each system, against a fake file system (the places
// are Windows', macOS' and Linux' own, so they are checked on any machine): PATH, pipx's and uv's
// bin folders and their variables, pip --user's folders, Homebrew's, the private install.
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import { describe, test } from 'node:test';
import { ExecutableNotFoundError, type FileSystem, installFolders, locateServer, privateEnvDir, type System } from '../src/client/locate';

/** A file system holding just `files` (all executable), in the system's own path syntax. */
function fakeFs(platform: NodeJS.Platform, files: string[]): FileSystem {
  const p = platform === 'win32' ? path.win32 : path.posix;
  const norm = (f: string): string => (platform === 'win32' ? f.toLowerCase() : f);
  const set = new Set(files.map(norm));
  return {
    isExecutable: async (file) => set.has(norm(file)),
    list: async (dir) => {
      const names = files.filter((f) => norm(p.dirname(f)) === norm(dir)).map((f) => p.basename(f));
      const below = files.map((f) => p.relative(dir, f)).filter((r) => r && !r.startsWith('..') && !p.isAbsolute(r));
      return [...new Set([...names, ...below.map((r) => r.split(p.sep)[0] as string)])];
    },
  };
}

const noShell = async (): Promise<undefined> => undefined;

const windows = (env: NodeJS.ProcessEnv = {}): System => ({
  platform: 'win32',
  home: 'C:\\Users\\ada',
  env: { APPDATA: 'C:\\Users\\ada\\AppData\\Roaming', LOCALAPPDATA: 'C:\\Users\\ada\\AppData\\Local', PATH: 'C:\\Windows\\system32;C:\\Windows', ...env },
});
const mac = (env: NodeJS.ProcessEnv = {}): System => ({ platform: 'darwin', home: '/Users/ada', env: { PATH: '/usr/bin:/bin', SHELL: '/bin/zsh', ...env } });
const linux = (env: NodeJS.ProcessEnv = {}): System => ({ platform: 'linux', home: '/home/ada', env: { PATH: '/usr/bin:/bin', SHELL: '/bin/bash', ...env } });

async function found(system: System, files: string[]): Promise<{ command: string; source: string }> {
  const { command, source } = await locateServer({ setting: '', system, fs: fakeFs(system.platform, files), shellLookup: noShell });
  return { command, source };
}

describe('finding mdsearch on Windows', () => {
  test("pip --user's Scripts folder is %APPDATA%\\Python\\Python3XY\\Scripts, the newest Python first", async () => {
    const files = [
      'C:\\Users\\ada\\AppData\\Roaming\\Python\\Python311\\Scripts\\mdsearch.exe',
      'C:\\Users\\ada\\AppData\\Roaming\\Python\\Python312\\Scripts\\mdsearch.exe',
    ];
    assert.deepEqual(await found(windows(), files), { command: files[1], source: 'install-folder' });
    // the folder without the version, where it used to look, is not where pip puts it
    await assert.rejects(found(windows(), ['C:\\Users\\ada\\AppData\\Roaming\\Python\\Scripts\\mdsearch.exe']), ExecutableNotFoundError);
  });

  test("pipx's and uv's default bin folder is %USERPROFILE%\\.local\\bin", async () => {
    const exe = 'C:\\Users\\ada\\.local\\bin\\mdsearch.exe';
    assert.deepEqual(await found(windows(), [exe]), { command: exe, source: 'install-folder' });
  });

  test('PIPX_BIN_DIR and UV_TOOL_BIN_DIR name other folders', async () => {
    const pipx = 'D:\\tools\\pipx\\mdsearch.exe';
    assert.deepEqual(await found(windows({ PIPX_BIN_DIR: 'D:\\tools\\pipx' }), [pipx]), { command: pipx, source: 'install-folder' });
    const uv = 'D:\\tools\\uv\\mdsearch.exe';
    assert.deepEqual(await found(windows({ UV_TOOL_BIN_DIR: 'D:\\tools\\uv' }), [uv]), { command: uv, source: 'install-folder' });
  });

  test('PATH comes before the install folders; a python.org Python and the private install after them', async () => {
    const onPath = 'C:\\Tools\\mdsearch.exe';
    const local = 'C:\\Users\\ada\\.local\\bin\\mdsearch.exe';
    assert.deepEqual(await found(windows({ PATH: 'C:\\Tools;C:\\Windows' }), [local, onPath]), { command: onPath, source: 'path' });
    const pythonOrg = 'C:\\Users\\ada\\AppData\\Local\\Programs\\Python\\Python313\\Scripts\\mdsearch.exe';
    const own = 'C:\\Users\\ada\\AppData\\Local\\mdsearch\\obsidian-env\\Scripts\\mdsearch.exe';
    assert.deepEqual(await found(windows(), [own, pythonOrg]), { command: pythonOrg, source: 'install-folder' });
    assert.deepEqual(await found(windows(), [own]), { command: own, source: 'private-install' });
  });

  test('not found: the message names the folders it looked in and the install routes', async () => {
    await assert.rejects(found(windows(), []), (e: unknown) => {
      assert.ok(e instanceof ExecutableNotFoundError);
      assert.match(e.message, /C:\\Users\\ada\\\.local\\bin/);
      assert.match(e.message, /C:\\Users\\ada\\AppData\\Local\\mdsearch\\obsidian-env\\Scripts/);
      assert.match(e.message, /pipx install mdsearch-ls.*uv tool install mdsearch-ls/);
      assert.doesNotMatch(e.message, /login shell/);
      return true;
    });
  });
});

describe('finding mdsearch on macOS', () => {
  test("Homebrew's /opt/homebrew/bin (Apple silicon) and /usr/local/bin (Intel)", async () => {
    assert.deepEqual(await found(mac(), ['/opt/homebrew/bin/mdsearch']), { command: '/opt/homebrew/bin/mdsearch', source: 'install-folder' });
    assert.deepEqual(await found(mac(), ['/usr/local/bin/mdsearch']), { command: '/usr/local/bin/mdsearch', source: 'install-folder' });
  });

  test("pipx's and uv's ~/.local/bin before Homebrew's, pip --user's ~/Library/Python/3.X/bin after", async () => {
    const files = ['/Users/ada/Library/Python/3.12/bin/mdsearch', '/opt/homebrew/bin/mdsearch', '/Users/ada/.local/bin/mdsearch'];
    assert.deepEqual(await found(mac(), files), { command: '/Users/ada/.local/bin/mdsearch', source: 'install-folder' });
    assert.deepEqual(await found(mac(), [files[0] as string]), { command: files[0], source: 'install-folder' });
  });

  test('the private install lives in Application Support', async () => {
    assert.equal(privateEnvDir(mac()), '/Users/ada/Library/Application Support/mdsearch/obsidian-env');
    const own = '/Users/ada/Library/Application Support/mdsearch/obsidian-env/bin/mdsearch';
    assert.deepEqual(await found(mac(), [own]), { command: own, source: 'private-install' });
  });

  test("the login shell's answer comes first (a dock-started app has launchd's PATH)", async () => {
    const system = mac();
    const exe = '/Users/ada/.pyenv/shims/mdsearch';
    const got = await locateServer({ setting: '', system, fs: fakeFs('darwin', [exe, '/opt/homebrew/bin/mdsearch']), shellLookup: async () => exe });
    assert.deepEqual([got.command, got.source], [exe, 'login-shell']);
  });
});

describe('finding mdsearch on Linux', () => {
  test('PIPX_BIN_DIR, UV_TOOL_BIN_DIR and XDG_BIN_HOME are honoured; ~/.local/bin by default', async () => {
    assert.deepEqual(await installFolders(linux()), ['/home/ada/.local/bin', '/usr/local/bin']);
    assert.deepEqual(
      await installFolders(linux({ PIPX_BIN_DIR: '/opt/pipx/bin', XDG_BIN_HOME: '/home/ada/bin' })),
      ['/opt/pipx/bin', '/home/ada/bin', '/usr/local/bin'],
    );
    assert.deepEqual(
      await found(linux({ UV_TOOL_BIN_DIR: '/opt/uv/bin' }), ['/opt/uv/bin/mdsearch']),
      { command: '/opt/uv/bin/mdsearch', source: 'install-folder' },
    );
  });

  test('the private install follows XDG_DATA_HOME', async () => {
    assert.equal(privateEnvDir(linux()), '/home/ada/.local/share/mdsearch/obsidian-env');
    assert.equal(privateEnvDir(linux({ XDG_DATA_HOME: '/data/ada' })), '/data/ada/mdsearch/obsidian-env');
  });

  test('a setting is taken as it is, ~ expanded; a relative one is refused', async () => {
    const exe = '/home/ada/venvs/notes/bin/mdsearch';
    const got = await locateServer({ setting: '~/venvs/notes/bin/mdsearch', system: linux(), fs: fakeFs('linux', [exe]), shellLookup: noShell });
    assert.deepEqual([got.command, got.args, got.source], [exe, ['serve'], 'setting']);
    const py = await locateServer({ setting: '/home/ada/venvs/notes/bin/python3.12', system: linux(), fs: fakeFs('linux', ['/home/ada/venvs/notes/bin/python3.12']), shellLookup: noShell });
    assert.deepEqual(py.args, ['-m', 'mdsearch_ls', 'serve']);
    await assert.rejects(locateServer({ setting: 'bin/mdsearch', system: linux(), fs: fakeFs('linux', []), shellLookup: noShell }), /not an absolute path/);
  });
});
