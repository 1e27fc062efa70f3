// The status bar's text and tooltip, from the supervisor's state and the server's
// `mdsearch/status`. Pure, so every state's wording is tested in Node.
import type { FolderStatus, StatusParams } from './protocol';
import type { ServerState } from './supervisor';

export interface StatusView {
  text: string;
  tooltip: string;
  error: boolean;
}

export const formatCount = (n: number): string => Math.round(n).toLocaleString('en-US');

/** "12/40 files" (the server's progress message) as [12, 40]. */
export function parseProgress(message: string | undefined): [number, number] | undefined {
  const m = /^(\d+)\/(\d+) files?$/.exec(message?.trim() ?? '');
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

export function renderStatus(state: ServerState, server: StatusParams | undefined): StatusView {
  switch (state.kind) {
    case 'stopped':
      return { text: 'mdsearch: stopped', tooltip: 'The mdsearch server is not running.', error: false };
    case 'starting':
      return { text: 'mdsearch: starting', tooltip: 'Starting the mdsearch server', error: false };
    case 'restarting':
      return {
        text: 'mdsearch: restarting',
        tooltip: `${state.reason}\nRestart ${state.failures} in ${Math.round(state.inMs / 1000)} s.`,
        error: true,
      };
    case 'failed':
      return { text: 'mdsearch: error', tooltip: state.message, error: true };
    case 'running':
      return server ? renderServer(server) : { text: 'mdsearch: starting', tooltip: 'Waiting for the server', error: false };
  }
}

function folderLine(f: FolderStatus): string {
  return `${formatCount(f.files)} notes, ${formatCount(f.chunks)} sections; index at ${f.index_dir || 'unknown'}`;
}

function renderServer(s: StatusParams): StatusView {
  const sections = s.folders.reduce((sum, f) => sum + f.chunks, 0);
  const detail = s.folders.map(folderLine).join('\n');
  switch (s.state) {
    case 'starting':
      return { text: 'mdsearch: starting', tooltip: s.message ?? 'The server is starting', error: false };
    case 'loading-model':
      return { text: 'mdsearch: loading model', tooltip: s.message ?? 'Loading the embedding model', error: false };
    case 'indexing': {
      const progress = parseProgress(s.message);
      const text = progress
        ? `mdsearch: indexing ${formatCount(progress[0])} of ${formatCount(progress[1])}`
        : 'mdsearch: indexing';
      return { text, tooltip: ['Indexing notes', s.message, detail].filter(Boolean).join('\n'), error: false };
    }
    case 'ready': {
      const readOnly = s.folders.some((f) => f.read_only);
      return {
        text: `mdsearch: ${formatCount(sections)} ${sections === 1 ? 'section' : 'sections'}${readOnly ? ' (read-only)' : ''}`,
        tooltip: [
          'mdsearch: ready',
          detail,
          readOnly ? 'Read-only: another mdsearch process writes this index; this one searches it.' : '',
        ].filter(Boolean).join('\n'),
        error: false,
      };
    }
    case 'error': {
      const errors = s.folders.map((f) => f.last_error).filter((e): e is string => !!e);
      return {
        text: 'mdsearch: error',
        tooltip: [s.message ?? 'The server reported an error', ...errors].join('\n'),
        error: true,
      };
    }
  }
}
