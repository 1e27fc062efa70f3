import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FolderStatus, StatusParams } from '../../src/protocol';
import { parseStatus } from '../../src/protocol';
import {
  describeFolder,
  FirstIndexNotice,
  formatCount,
  isFirstIndex,
  type ProgressReport,
  renderStatus,
} from '../../src/status';

const folder = (over: Partial<FolderStatus> = {}): FolderStatus => ({
  root: '/home/me/vault',
  name: 'vault',
  files: 12,
  chunks: 1234,
  model: 'all-MiniLM-L6-v2',
  index_dir: '/home/me/.cache/mdsearch/abc',
  vectors: '/home/me/.cache/mdsearch/abc/chroma',
  queue: 0,
  state: 'ready',
  last_error: null,
  last_update: '2025-01-01T10:00:00Z',
  read_only: false,
  held_by: null,
  index: { state: 'ready', files_done: 0, files_total: 0 },
  ...over,
});

const server = (status: StatusParams) => renderStatus({ kind: 'server', status });

describe('renderStatus', () => {
  it('shows the percentage while indexing', () => {
    const view = server({ state: 'indexing', percentage: 41.6, message: '5/12 files', folders: [folder({ state: 'indexing' })] });
    assert.equal(view.text, '$(search) mdsearch: indexing 42%');
    assert.match(view.tooltip, /5\/12 files/);
    assert.equal(view.command, 'mdsearch.showStatus');
    assert.equal(view.error, false);
  });

  it('shows indexing without a number before the first report', () => {
    assert.equal(server({ state: 'indexing', folders: [] }).text, '$(search) mdsearch: indexing');
  });

  it('clamps odd percentages', () => {
    assert.equal(server({ state: 'indexing', percentage: 140, folders: [] }).text, '$(search) mdsearch: indexing 100%');
    assert.equal(server({ state: 'indexing', percentage: -3, folders: [] }).text, '$(search) mdsearch: indexing 0%');
  });

  it('shows the section count, summed over folders, when ready', () => {
    const view = server({ state: 'ready', folders: [folder({ chunks: 1000 }), folder({ root: '/work', chunks: 234 })] });
    assert.equal(view.text, '$(search) 1,234 sections');
    assert.match(view.tooltip, /vault: 12 files, 1,000 sections/);
    assert.equal(view.command, 'mdsearch.showStatus');
  });

  it('says so when another process writes a folder\'s index', () => {
    const view = server({ state: 'ready', folders: [folder({ read_only: true }), folder({ root: '/work', chunks: 6 })] });
    assert.equal(view.text, '$(search) 1,240 sections (read-only)');
    assert.match(view.tooltip, /another mdsearch process \(another window\?\) indexes vault;/);
    assert.doesNotMatch(server({ state: 'ready', folders: [folder()] }).text, /read-only/);
    assert.match(describeFolder(folder({ read_only: true })).detail, /read-only: another mdsearch process indexes it/);
    assert.equal(parseStatus({ state: 'ready', folders: [{ root: '/v', read_only: true }] })?.folders[0]?.read_only, true);
  });

  it('uses the singular for one section', () => {
    assert.equal(server({ state: 'ready', folders: [folder({ chunks: 1 })] }).text, '$(search) 1 section');
  });

  it('shows model loading', () => {
    assert.equal(server({ state: 'loading-model', folders: [] }).text, '$(search) mdsearch: loading model');
  });

  it('turns an error into a red item that opens the logs', () => {
    const view = server({ state: 'error', message: 'model failed', folders: [folder({ state: 'error', last_error: 'disk full' })] });
    assert.equal(view.text, '$(error) mdsearch: error');
    assert.equal(view.command, 'mdsearch.showLogs');
    assert.equal(view.error, true);
    assert.match(view.tooltip, /model failed/);
    assert.match(view.tooltip, /disk full/);
  });

  it('covers the client-side states', () => {
    assert.equal(renderStatus({ kind: 'starting' }).text, '$(search) mdsearch: starting');
    const failed = renderStatus({ kind: 'failed', message: 'mdsearch_ls is not installed' });
    assert.equal(failed.text, '$(error) mdsearch: error');
    assert.equal(failed.command, 'mdsearch.showLogs');
    assert.equal(renderStatus({ kind: 'stopped' }).error, true);
  });
});

describe('status from the wire', () => {
  it('parses mdsearch/status params and renders them', () => {
    const wire: unknown = JSON.parse(
      '{"state":"indexing","percentage":50,"message":"1/2 files","folders":[{"root":"/v","files":2,"chunks":3,"model":"m","index_dir":"/i","queue":1,"state":"indexing","last_error":null,"last_update":null}]}',
    );
    const status = parseStatus(wire);
    assert.ok(status);
    assert.equal(server(status).text, '$(search) mdsearch: indexing 50%');
    assert.equal(status.folders[0]?.queue, 1);
  });

  it('rejects garbage and tolerates missing folder fields', () => {
    assert.equal(parseStatus(null), undefined);
    assert.equal(parseStatus({ folders: [] }), undefined);
    const status = parseStatus({ state: 'ready', folders: [{ root: '/v' }] });
    assert.deepEqual(status?.folders[0], {
      root: '/v', name: 'v', files: 0, chunks: 0, model: '', index_dir: null, vectors: null, queue: 0, state: 'starting', last_error: null,
      last_update: null, read_only: false, held_by: null, index: { state: 'empty', files_done: 0, files_total: 0 },
    });
  });

  it('keeps every state the server has, "starting" included, and never guesses "ready"', () => {
    // The old hand-written list lacked "starting", so a folder still opening showed as ready.
    const status = parseStatus({ state: 'starting', model_state: 'loading', folders: [{ root: '/v', state: 'starting', uri: 'file:///v' }] });
    assert.equal(status?.state, 'starting');
    assert.equal(status?.model_state, 'loading');
    assert.equal(status?.folders[0]?.state, 'starting');
    assert.equal(status?.folders[0]?.uri, 'file:///v');
    assert.equal(server(status).text, '$(search) mdsearch: starting');
    assert.equal(parseStatus({ state: 'a-state-from-a-newer-server', folders: [] })?.state, 'starting');
  });
});

describe('formatCount and describeFolder', () => {
  it('groups thousands', () => {
    assert.equal(formatCount(1234567), '1,234,567');
    assert.equal(formatCount(0), '0');
  });
  it('lists files, sections, model and index location', () => {
    const row = describeFolder(folder({ queue: 2, last_error: 'oops' }));
    assert.equal(row.label, '$(folder) vault');
    assert.equal(row.description, 'ready · /home/me/vault');
    assert.match(row.detail, /^12 files · 1,234 sections · model all-MiniLM-L6-v2 · index at \/home\/me\/.cache\/mdsearch\/abc/);
    assert.match(row.detail, /2 queued/);
    assert.match(row.detail, /last error: oops/);
  });
});

describe('first index notification', () => {
  const fresh = folder({ state: 'indexing', chunks: 0, files: 0, last_update: null });

  it('detects a first index', () => {
    assert.equal(isFirstIndex({ state: 'indexing', folders: [fresh] }), true);
    assert.equal(isFirstIndex({ state: 'indexing', folders: [folder({ state: 'indexing' })] }), false);
    assert.equal(isFirstIndex({ state: 'ready', folders: [fresh] }), false);
  });

  /** Drives FirstIndexNotice with a fake notification that records what it was told. */
  function harness(alreadyIndexed: boolean) {
    const reports: ProgressReport[] = [];
    let opened = 0;
    let closed = 0;
    let marked = false;
    const start = (task: (report: (p: ProgressReport) => void) => Promise<void>) => {
      opened += 1;
      void task((p) => reports.push(p)).then(() => {
        closed += 1;
      });
    };
    const notice = new FirstIndexNotice(start, () => alreadyIndexed || marked, () => {
      marked = true;
    });
    return { notice, reports, counts: () => ({ opened, closed, marked }) };
  }

  it('opens once, reports increments, and closes when ready', async () => {
    const h = harness(false);
    h.notice.update({ state: 'indexing', percentage: 0, message: '0/4 files', folders: [fresh] });
    h.notice.update({ state: 'indexing', percentage: 25, message: '1/4 files', folders: [fresh] });
    h.notice.update({ state: 'indexing', percentage: 75, message: '3/4 files', folders: [fresh] });
    h.notice.update({ state: 'ready', folders: [folder()] });
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(h.counts(), { opened: 1, closed: 1, marked: true });
    assert.deepEqual(h.reports.map((r) => r.increment), [0, 0, 25, 50]);
    assert.equal(h.reports.at(-1)?.message, '3/4 files');
    // a later re-index of an indexed workspace stays in the status bar
    h.notice.update({ state: 'indexing', percentage: 10, folders: [folder({ state: 'indexing' })] });
    assert.equal(h.counts().opened, 1);
  });

  it('covers model loading and survives the server flipping between loading and indexing', async () => {
    const h = harness(false);
    h.notice.update({ state: 'indexing', folders: [fresh] });
    h.notice.update({ state: 'loading-model', folders: [fresh] });
    h.notice.update({ state: 'indexing', percentage: 60, message: '3/5 files', folders: [fresh] });
    h.notice.update({ state: 'ready', folders: [folder()] });
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(h.counts(), { opened: 1, closed: 1, marked: true });
    assert.deepEqual(h.reports.map((r) => r.message), [undefined, 'indexing', 'loading the embedding model', '3/5 files']);
  });

  it('closes on a server error', async () => {
    const h = harness(false);
    h.notice.update({ state: 'loading-model', folders: [fresh] });
    h.notice.update({ state: 'error', message: 'no model', folders: [fresh] });
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(h.counts(), { opened: 1, closed: 1, marked: false });
  });

  it('stays quiet for a workspace that was indexed before', () => {
    const h = harness(true);
    h.notice.update({ state: 'indexing', percentage: 5, folders: [folder({ state: 'indexing' })] });
    assert.equal(h.counts().opened, 0);
  });

  it('closes when the server goes away mid-index', async () => {
    const h = harness(false);
    h.notice.update({ state: 'indexing', percentage: 5, folders: [fresh] });
    h.notice.update(undefined);
    await new Promise((r) => setImmediate(r));
    assert.equal(h.counts().closed, 1);
  });
});
