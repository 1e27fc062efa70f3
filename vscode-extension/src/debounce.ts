// Small timing helpers shared by the search box (type-ahead) and the restart-on-settings logic.

export interface Debounced<A extends unknown[]> {
  (...args: A): void;
  /** Drops a pending call. */
  cancel(): void;
  /** Runs a pending call now, if any. */
  flush(): void;
}

/** Calls `fn` once, `ms` after the last call, with the last arguments. */
export function debounce<A extends unknown[]>(fn: (...args: A) => void, ms: number): Debounced<A> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let pending: A | undefined;
  const run = (): void => {
    timer = undefined;
    const args = pending;
    pending = undefined;
    if (args) fn(...args);
  };
  const debounced = ((...args: A) => {
    pending = args;
    if (timer !== undefined) clearTimeout(timer);
    timer = setTimeout(run, ms);
  }) as Debounced<A>;
  debounced.cancel = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    pending = undefined;
  };
  debounced.flush = () => {
    if (timer !== undefined) {
      clearTimeout(timer);
      run();
    }
  };
  return debounced;
}

/** The part of a CancellationTokenSource we need; vscode's and a test double both fit. */
export interface Cancellable<T> {
  readonly token: T;
  cancel(): void;
  dispose(): void;
}

/** Hands out one token per request and cancels the previous one, so only the latest search can
 * update the list (stale answers arriving late are dropped by checking `isLatest`). */
export class LatestOnly<T> {
  private current: Cancellable<T> | undefined;
  private generation = 0;

  constructor(private readonly create: () => Cancellable<T>) {}

  next(): { token: T; generation: number } {
    this.cancel();
    this.current = this.create();
    return { token: this.current.token, generation: this.generation };
  }

  isLatest(generation: number): boolean {
    return generation === this.generation;
  }

  /** Cancels the outstanding request; its answer, if it still arrives, is no longer the latest. */
  cancel(): void {
    this.generation += 1;
    if (this.current) {
      this.current.cancel();
      this.current.dispose();
      this.current = undefined;
    }
  }
}
