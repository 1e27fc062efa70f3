// Shared by the tests: the real server's executable, a fresh copy of the examples vault with its
// own index folder, and polling with a deadline (never a sleep as synchronisation).
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

// The client half calls window.setTimeout, as Obsidian plugins do; under Node the global object
// stands in (the stand-in `obsidian` module does the same for the wiring's tests).
(globalThis as { window?: unknown }).window ??= globalThis;

/** obsidian-plugin/ (the bundles run from out/test/). */
export const PLUGIN_DIR = path.resolve(__dirname, '..', '..');

/** `MDSEARCH` when set, else ../.venv/bin/mdsearch relative to obsidian-plugin/. */
export function mdsearchExecutable(): string {
  const fromEnv = process.env.MDSEARCH;
  const exe = fromEnv ? path.resolve(fromEnv) : path.join(PLUGIN_DIR, '..', '.venv', 'bin', 'mdsearch');
  if (!fs.existsSync(exe)) {
    throw new Error(`no mdsearch executable at ${exe}: set MDSEARCH to the path of the mdsearch executable`);
  }
  return exe;
}

export interface TempVault {
  root: string;
  cache: string;
  env: NodeJS.ProcessEnv;
  write(rel: string, text: string): void;
  read(rel: string): string;
  cleanup(): void;
}

/** examples/vault copied to a temp dir; MDSEARCH_CACHE_DIR in another, so the index goes there
 * (and the test can check that nothing lands in the vault). */
export function tempVault(): TempVault {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'mdsearch-obsidian-'));
  const root = path.join(base, 'vault');
  const cache = path.join(base, 'cache');
  fs.cpSync(path.join(PLUGIN_DIR, '..', 'examples', 'vault'), root, { recursive: true });
  fs.mkdirSync(cache);
  return {
    root,
    cache,
    env: { ...process.env, MDSEARCH_CACHE_DIR: cache },
    write: (rel, text) => {
      fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      fs.writeFileSync(path.join(root, rel), text);
    },
    read: (rel) => fs.readFileSync(path.join(root, rel), 'utf8'),
    cleanup: () => fs.rmSync(base, { recursive: true, force: true }),
  };
}

/** Every file under `dir`, relative, sorted (to compare a vault before and after). */
export function listFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(path.relative(dir, p));
    }
  };
  walk(dir);
  return out.sort();
}

/** Calls `probe` until it returns a value that is not undefined/false, or throws when
 * `timeoutMs` has passed (with the last error or value in the message). */
export async function until<T>(what: string, timeoutMs: number, probe: () => T | undefined | false | Promise<T | undefined | false>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v;
      last = v;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${String(last)})`);
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setTimeout(r, 20));
  }
}
