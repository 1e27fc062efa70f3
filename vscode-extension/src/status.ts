// Status bar text from the server's `mdsearch/status` events, and the per-folder status report.
// The rendering is pure; the controller gets its StatusBarItem and colours injected, so this file
// only imports types from `vscode` and is unit-tested in plain Node.
import type { StatusBarItem, ThemeColor } from 'vscode';
import { baseName } from './hits';
import type { FolderStatus, StatusParams } from './protocol';

/** What the client knows: either the server's last status, or a state before/after the server. */
export type ClientStatus =
  | { kind: 'off' }
  | { kind: 'starting' }
  | { kind: 'stopped'; message?: string }
  | { kind: 'failed'; message: string }
  | { kind: 'server'; status: StatusParams };

export interface StatusView {
  text: string;
  tooltip: string;
  /** Command run on click: the status report normally, the logs when something is wrong. */
  command: 'mdsearch.showStatus' | 'mdsearch.showLogs';
  error: boolean;
}

/** Fixed locale so "1,234 sections" reads the same on every machine (and in tests). */
export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

export function totalSections(folders: readonly FolderStatus[]): number {
  return folders.reduce((sum, f) => sum + f.chunks, 0);
}

function clampPercent(p: number): number {
  return Math.min(100, Math.max(0, Math.round(p)));
}

export function renderStatus(status: ClientStatus): StatusView {
  switch (status.kind) {
    case 'off':
    case 'starting':
      return {
        text: '$(search) mdsearch: starting',
        tooltip: 'mdsearch: starting the language server',
        command: 'mdsearch.showLogs',
        error: false,
      };
    case 'stopped':
      return {
        text: '$(search) mdsearch: stopped',
        tooltip: status.message ?? 'mdsearch: the language server is not running. Click for the logs.',
        command: 'mdsearch.showLogs',
        error: true,
      };
    case 'failed':
      return {
        text: '$(error) mdsearch: error',
        tooltip: `${status.message}\nClick for the logs.`,
        command: 'mdsearch.showLogs',
        error: true,
      };
    case 'server':
      return renderServerStatus(status.status);
  }
}

function renderServerStatus(s: StatusParams): StatusView {
  const sections = totalSections(s.folders);
  const detail = s.folders.map((f) => `${baseName(f.root)}: ${formatCount(f.files)} files, ${formatCount(f.chunks)} sections`).join('\n');
  switch (s.state) {
    case 'starting':
      return {
        text: '$(search) mdsearch: starting',
        tooltip: s.message ?? 'mdsearch: opening the indexes',
        command: 'mdsearch.showStatus',
        error: false,
      };
    case 'loading-model':
      return {
        text: '$(search) mdsearch: loading model',
        tooltip: s.message ?? 'mdsearch: loading the embedding model',
        command: 'mdsearch.showStatus',
        error: false,
      };
    case 'indexing': {
      const pct = s.percentage === undefined ? '' : ` ${clampPercent(s.percentage)}%`;
      return {
        text: `$(search) mdsearch: indexing${pct}`,
        tooltip: ['mdsearch: indexing notes', s.message, detail].filter(Boolean).join('\n'),
        command: 'mdsearch.showStatus',
        error: false,
      };
    }
    case 'ready': {
      const readOnly = s.folders.filter((f) => f.read_only).map((f) => baseName(f.root));
      const note = readOnly.length
        ? `Read-only: another mdsearch process (another window?) indexes ${readOnly.join(', ')}; this window searches it and indexes saves once that process is gone.`
        : '';
      return {
        text: `$(search) ${formatCount(sections)} ${sections === 1 ? 'section' : 'sections'}${readOnly.length ? ' (read-only)' : ''}`,
        tooltip: [`mdsearch: ${formatCount(sections)} sections indexed`, detail, note, 'Click for details.'].filter(Boolean).join('\n'),
        command: 'mdsearch.showStatus',
        error: false,
      };
    }
    case 'error': {
      const errors = s.folders.map((f) => f.last_error).filter((e): e is string => !!e);
      return {
        text: '$(error) mdsearch: error',
        tooltip: [s.message ?? 'mdsearch: the server reported an error', ...errors, 'Click for the logs.'].join('\n'),
        command: 'mdsearch.showLogs',
        error: true,
      };
    }
  }
}

/** One row of the status report (`mdsearch.showStatus`). */
export function describeFolder(f: FolderStatus): { label: string; description: string; detail: string } {
  const parts = [
    `${formatCount(f.files)} files`,
    `${formatCount(f.chunks)} sections`,
    `model ${f.model || 'default'}`,
    `index at ${f.index_dir || 'unknown'}`,
  ];
  if (f.queue > 0) parts.push(`${formatCount(f.queue)} queued`);
  if (f.last_update) parts.push(`updated ${f.last_update}`);
  if (f.read_only) parts.push('read-only: another mdsearch process indexes it');
  if (f.last_error) parts.push(`last error: ${f.last_error}`);
  return { label: `$(folder) ${baseName(f.root)}`, description: `${f.state} · ${f.root}`, detail: parts.join(' · ') };
}

/** True when an `indexing` status is the first index of a vault: every indexing folder starts from
 * nothing. Only then is a notification worth the interruption; re-indexing shows in the status bar. */
export function isFirstIndex(s: StatusParams): boolean {
  const indexing = s.folders.filter((f) => f.state === 'indexing');
  return s.state === 'indexing' && indexing.length > 0 && indexing.every((f) => f.last_update === null && f.chunks === 0);
}

/** Renders ClientStatus onto a StatusBarItem, hidden while mdsearch is off. */
export class StatusBar {
  private current: ClientStatus = { kind: 'off' };

  constructor(
    private readonly item: StatusBarItem,
    private readonly colours: { errorBackground: ThemeColor },
  ) {
    this.render();
  }

  get status(): ClientStatus {
    return this.current;
  }

  update(status: ClientStatus): void {
    this.current = status;
    this.render();
  }

  private render(): void {
    const view = renderStatus(this.current);
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.command = view.command;
    this.item.backgroundColor = view.error ? this.colours.errorBackground : undefined;
    // Nothing to show where mdsearch is not on (a folder that is no vault).
    if (this.current.kind === 'off') this.item.hide();
    else this.item.show();
  }
}

export interface ProgressReport {
  message?: string;
  increment?: number;
}

/** Shows a notification with progress for the first index of a vault (a workspace that never
 * reached "ready", or folders that start from zero sections), and closes it when the index is
 * ready, fails, or the server goes away. Loading the model counts as part of that wait: for a new
 * vault it is most of it. Later re-indexing stays in the status bar only. `start` opens the
 * notification; it may call its task later (VS Code does), so updates before that are replayed. */
export class FirstIndexNotice {
  private active = false;
  private report: ((p: ProgressReport) => void) | undefined;
  private finish: (() => void) | undefined;
  private reported = 0;
  private percent = 0;
  private message: string | undefined;
  private wasBusy = false;

  constructor(
    private readonly start: (task: (report: (p: ProgressReport) => void) => Promise<void>) => void,
    private readonly alreadyIndexed: () => boolean,
    private readonly markIndexed: () => void,
  ) {}

  get open(): boolean {
    return this.active;
  }

  /** Feed every status; undefined means the server went away. */
  update(s: StatusParams | undefined): void {
    const busy = s?.state === 'indexing' || s?.state === 'loading-model';
    const first = s !== undefined && (!this.alreadyIndexed() || isFirstIndex(s));
    if (busy && !this.wasBusy && !this.active && first) {
      this.active = true;
      this.reported = 0;
      this.percent = 0;
      this.message = undefined;
      this.start(
        (report) =>
          new Promise<void>((resolve) => {
            if (!this.active) {
              resolve(); // indexing ended before the notification appeared
              return;
            }
            this.report = report;
            this.finish = resolve;
            this.flush();
          }),
      );
    }
    this.wasBusy = busy;
    if (s?.state === 'ready') this.markIndexed();
    if (busy && s && this.active) {
      if (s.state === 'loading-model') {
        this.message = 'loading the embedding model';
      } else {
        if (s.percentage !== undefined) this.percent = Math.max(this.percent, clampPercent(s.percentage));
        this.message = s.message ?? 'indexing';
      }
      this.flush();
    }
    if (!busy && this.active) {
      this.active = false;
      this.finish?.();
      this.finish = undefined;
      this.report = undefined;
    }
  }

  private flush(): void {
    if (!this.report) return;
    const p: ProgressReport = { increment: this.percent - this.reported };
    if (this.message) p.message = this.message;
    this.reported = this.percent;
    this.report(p);
  }
}
