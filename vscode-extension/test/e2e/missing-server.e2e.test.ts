// End to end: an interpreter without mdsearch_ls must produce a clear error with "Open settings"
// and "Copy install command", and a red status bar item; never a silent failure.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CODE_SERVER, FIXTURE, VSIX } from './config';
import { log, openSession, type Session, waitFor } from './harness';

describe('mdsearch with a Python that lacks the server package', { timeout: 180_000 }, () => {
  let session: Session | undefined;

  before(async () => {
    const bare = fs.mkdtempSync(path.join(fs.realpathSync('/tmp'), 'mdsearch-bare-python-'));
    const python = path.join(bare, 'python');
    // A real interpreter with no site-packages: mdsearch_ls cannot be importable from it.
    const base = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
    fs.writeFileSync(python, `#!/bin/sh\nexec ${base} -I -S "$@"\n`, { mode: 0o755 });
    session = await openSession({
      name: 'missing',
      codeServer: CODE_SERVER,
      vsix: VSIX,
      fixture: FIXTURE,
      settings: { 'mdsearch.server.pythonPath': python },
    });
  });

  after(async () => {
    await session?.close();
  });

  it('explains the problem with "Open settings" and "Copy install command"', async () => {
    assert.ok(session);
    const { wb } = session;
    const toast = wb.page.locator('.notification-toast', { hasText: 'mdsearch_ls is not installed' });
    await toast.first().waitFor({ timeout: 60_000 });
    const text = await toast.first().innerText();
    log(`notification: ${text.replace(/\s+/g, ' ')}`);
    assert.match(text, /mdsearch\.server\.pythonPath/);
    await toast.getByRole('button', { name: 'Copy install command' }).waitFor();
    await wb.screenshot('missing-server.png');
    const status = await waitFor('the error state in the status bar', async () => {
      const t = await wb.mdsearchStatus();
      return /error/.test(t) ? t : undefined;
    }, 10_000);
    assert.equal(status, 'mdsearch: error');
    await toast.getByRole('button', { name: 'Open settings' }).click();
    // the settings editor opens filtered to the interpreter setting
    await wb.page.locator('.settings-editor').waitFor({ timeout: 15_000 });
    await wb.page
      .locator('.settings-editor .setting-item-contents', { hasText: 'Python interpreter that has the' })
      .first()
      .waitFor({ timeout: 15_000 });
  });
});
