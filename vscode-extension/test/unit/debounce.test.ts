import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';
import { debounce, LatestOnly } from '../../src/debounce';

describe('debounce', () => {
  it('calls once with the last arguments after the quiet period', () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const calls: string[] = [];
      const d = debounce((q: string) => calls.push(q), 150);
      d('m');
      mock.timers.tick(100);
      d('mo');
      mock.timers.tick(100);
      d('mon');
      assert.deepEqual(calls, []);
      mock.timers.tick(150);
      assert.deepEqual(calls, ['mon']);
    } finally {
      mock.timers.reset();
    }
  });

  it('can be cancelled and flushed', () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const calls: number[] = [];
      const d = debounce((n: number) => calls.push(n), 50);
      d(1);
      d.cancel();
      mock.timers.tick(100);
      assert.deepEqual(calls, []);
      d(2);
      d.flush();
      assert.deepEqual(calls, [2]);
      d.flush(); // nothing pending
      assert.deepEqual(calls, [2]);
    } finally {
      mock.timers.reset();
    }
  });
});

describe('LatestOnly', () => {
  const source = () => {
    const token = { cancelled: false };
    return { token, cancel: () => (token.cancelled = true), dispose: () => undefined };
  };

  it('cancels the previous request when a new one starts', () => {
    const latest = new LatestOnly(source);
    const a = latest.next();
    const b = latest.next();
    assert.equal(a.token.cancelled, true);
    assert.equal(b.token.cancelled, false);
    assert.equal(latest.isLatest(a.generation), false);
    assert.equal(latest.isLatest(b.generation), true);
  });

  it('makes an outstanding answer stale on cancel', () => {
    const latest = new LatestOnly(source);
    const a = latest.next();
    latest.cancel();
    assert.equal(a.token.cancelled, true);
    assert.equal(latest.isLatest(a.generation), false);
  });
});
