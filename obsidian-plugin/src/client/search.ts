// Search as you type: each keystroke restarts a short wait; when it ends the query goes to the
// server, the request before it is cancelled, and an answer that is no longer the latest is
// dropped. Every caller waiting meanwhile gets the latest answer, so a list can never show the
// results of a query the user has typed past. Also the rows' text (heading path, note, snippet).
import { CancellationTokenSource, type CancellationToken } from 'vscode-languageserver-protocol/node';
import type { Hit } from './protocol';

export const SEARCH_DEBOUNCE_MS = 150;

interface Waiter<T> {
  resolve: (value: T) => void;
  reject: (error: unknown) => void;
}

export class LiveSearch<T> {
  private timer: number | undefined;
  private waiters: Waiter<T>[] = [];
  private generation = 0;
  private inflight: CancellationTokenSource | undefined;
  /** Queries actually sent (tests check that a burst of keystrokes sends one). */
  sent = 0;

  constructor(
    private readonly run: (query: string, token: CancellationToken) => Promise<T>,
    private readonly empty: T,
    private readonly delayMs = SEARCH_DEBOUNCE_MS,
  ) {}

  /** The answer for `query`, or for a later query if one arrives before this one is answered. */
  request(query: string): Promise<T> {
    const generation = ++this.generation;
    window.clearTimeout(this.timer);
    this.inflight?.cancel();
    this.inflight = undefined;
    const promise = new Promise<T>((resolve, reject) => this.waiters.push({ resolve, reject }));
    if (query.trim() === '') {
      this.settle(generation, { ok: true, value: this.empty });
      return promise;
    }
    this.timer = window.setTimeout(() => {
      this.timer = undefined;
      const source = new CancellationTokenSource();
      this.inflight = source;
      this.sent += 1;
      this.run(query, source.token).then(
        (value) => this.settle(generation, { ok: true, value }),
        (error: unknown) => this.settle(generation, { ok: false, error }),
      );
    }, this.delayMs);
    return promise;
  }

  private settle(generation: number, outcome: { ok: true; value: T } | { ok: false; error: unknown }): void {
    if (generation !== this.generation) return; // stale: a later query owns the waiters
    this.inflight = undefined;
    for (const w of this.waiters.splice(0)) {
      if (outcome.ok) w.resolve(outcome.value);
      else w.reject(outcome.error);
    }
  }

  /** The modal closed: cancel what is pending; waiters get the empty answer. */
  cancel(): void {
    this.generation += 1;
    window.clearTimeout(this.timer);
    this.timer = undefined;
    this.inflight?.cancel();
    this.inflight = undefined;
    for (const w of this.waiters.splice(0)) w.resolve(this.empty);
  }
}

export interface HitRow {
  hit: Hit;
  /** "Note › Heading › Subheading". */
  headingPath: string;
  /** The note's vault path without its extension. */
  note: string;
  snippet: string;
  /** "0.62" or "" for a keyword-only hit. */
  score: string;
}

export function hitRow(hit: Hit): HitRow {
  const headingPath = (hit.breadcrumb || hit.title || hit.path).split(' > ').join(' › ');
  return {
    hit,
    headingPath,
    note: hit.path.replace(/\.(md|markdown)$/i, ''),
    snippet: hit.snippet.replace(/\s+/g, ' ').trim(),
    score: hit.score === null ? '' : hit.score.toFixed(2),
  };
}

/** Splits `text` into runs, marking the words of `query` (filters left out), for highlighting in
 * the snippet. */
export function highlight(text: string, query: string): { text: string; match: boolean }[] {
  const words = query
    .split(/\s+/)
    .filter((w) => w && !/^-?[a-z]+:/i.test(w))
    .map((w) => w.replace(/^["'+-]+|["']+$/g, ''))
    .filter((w) => w.length >= 2)
    .map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  if (!words.length) return [{ text, match: false }];
  const re = new RegExp(`(${words.join('|')})`, 'gi');
  const out: { text: string; match: boolean }[] = [];
  let last = 0;
  for (const m of text.matchAll(re)) {
    const at = m.index ?? 0;
    if (at > last) out.push({ text: text.slice(last, at), match: false });
    out.push({ text: m[0], match: true });
    last = at + m[0].length;
  }
  if (last < text.length) out.push({ text: text.slice(last), match: false });
  return out;
}
