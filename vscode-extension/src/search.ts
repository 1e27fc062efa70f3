// The QuickPick UI for "Search Notes" and "Related Sections": search-as-you-type with debounce and
// cancellation, live preview of the active row, and opening the section selected on Enter.
import * as vscode from 'vscode';
import { debounce, LatestOnly } from './debounce';
import {
  describeSearchError,
  hitsToItems,
  type HitItem,
  isConvertedDocument,
  messageItem,
  sectionLines,
} from './hits';
import { type Hit, parseHits, type RelatedArgs, type SearchArgs, ServerCommands } from './protocol';

/** Wait after the last keystroke before asking the server; short enough to feel live. */
export const SEARCH_DEBOUNCE_MS = 150;

/** What the UI needs from the server side; ServerManager provides it. */
export interface SearchBackend {
  execute(command: string, args: unknown[], token?: vscode.CancellationToken): Promise<unknown>;
}

const isMultiRoot = (): boolean => (vscode.workspace.workspaceFolders?.length ?? 0) > 1;

/** Opens `hit` with its section selected. The selection runs from the end of the section back to
 * its heading, so the cursor (and VS Code's "Ln" indicator) sits on the heading line. */
export async function openHit(
  hit: Hit,
  options: { preview: boolean; preserveFocus: boolean },
): Promise<vscode.TextEditor | undefined> {
  if (isConvertedDocument(hit)) {
    // A PDF or a notebook: VS Code's own viewer (or an extension's) opens it; its lines are those
    // of the converted text, so there is no line to select.
    await vscode.commands.executeCommand('vscode.open', vscode.Uri.parse(hit.uri), {
      preview: options.preview,
      preserveFocus: options.preserveFocus,
    });
    return undefined;
  }
  const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(hit.uri));
  const { start, end } = sectionLines(hit, doc.lineCount);
  const editor = await vscode.window.showTextDocument(doc, {
    preview: options.preview,
    preserveFocus: options.preserveFocus,
  });
  // Set after showing: the `selection` option of showTextDocument takes a Range and so loses the
  // direction, which would leave the cursor at the end of the section.
  editor.selection = new vscode.Selection(doc.lineAt(end).range.end, new vscode.Position(start, 0));
  editor.revealRange(new vscode.Range(start, 0, end, 0), vscode.TextEditorRevealType.AtTop);
  return editor;
}

/** Remembers the editor before previews move it, to put it back when the pick is dismissed. */
function rememberEditor(): () => Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor) return () => Promise.resolve();
  const { document, selections, visibleRanges, viewColumn } = editor;
  return async () => {
    // preserveFocus false: the preview that had the focus is gone, and without this the keyboard
    // would land nowhere (document.body) after Escape.
    const restored = await vscode.window.showTextDocument(document, { viewColumn, preserveFocus: false, preview: false });
    restored.selections = selections;
    if (visibleRanges[0]) restored.revealRange(visibleRanges[0], vscode.TextEditorRevealType.AtTop);
  };
}

/** Keeps the rows in the order they are given (the engine's). By default VS Code moves the rows
 * whose label matches the typed text above the rest and sorts those by name, so typing "security"
 * listed "Security" above "Security incidents" whatever the engine ranked (microsoft/vscode
 * #73904). No stable API turns that off and no label can dodge it, since the title is the label:
 * `sortByLabel` is in the quickPickSortByLabel proposal, but the extension host passes it on
 * without checking that the proposal is enabled (from its start in 2019 to 1.100, the VS Code
 * tested here), and published extensions rely on that. Should a later VS Code refuse it, the pick
 * still works, in VS Code's order; test/e2e/order.e2e.test.ts checks that it is honoured. */
export function keepItemOrder<T extends vscode.QuickPickItem>(pick: vscode.QuickPick<T>): void {
  try {
    (pick as vscode.QuickPick<T> & { sortByLabel: boolean }).sortByLabel = false;
  } catch {
    // refused: VS Code's own order, as before
  }
}

interface PickOptions {
  title: string;
  placeholder: string;
  /** When given, each change of the input runs this query (debounced) instead of filtering. */
  search?: (query: string, token: vscode.CancellationToken) => Promise<Hit[]>;
  /** Fixed hits (related sections); typing then filters them with VS Code's own matcher. */
  initial?: Promise<Hit[]>;
  value?: string;
}

function showHitPick(options: PickOptions): Promise<void> {
  const pick = vscode.window.createQuickPick<HitItem>();
  pick.title = options.title;
  pick.placeholder = options.placeholder;
  // Highlight query words wherever they occur; alwaysShow on every hit (set in hitToItem) keeps
  // the matcher from hiding semantic hits that share no word with the query.
  pick.matchOnDescription = true;
  pick.matchOnDetail = true;
  const restore = rememberEditor();
  let accepted = false;
  let previewed = false;
  const latest = new LatestOnly(() => new vscode.CancellationTokenSource());
  const disposables: vscode.Disposable[] = [];

  const showResult = (items: HitItem[]): void => {
    pick.items = items;
    pick.title = options.title;
  };
  const showError = (error: unknown): void => {
    const { message, userError } = describeSearchError(error);
    pick.items = [messageItem(message, userError ? 'warning' : 'error')];
    pick.title = `${options.title}: ${message}`;
  };

  if (options.search) {
    keepItemOrder(pick);
    const search = options.search;
    const run = debounce((query: string) => {
      const { token, generation } = latest.next();
      pick.busy = true;
      search(query, token).then(
        (hits) => {
          if (!latest.isLatest(generation)) return;
          showResult(hits.length ? hitsToItems(hits, { multiRoot: isMultiRoot() }) : [messageItem('No matching sections')]);
          pick.busy = false;
        },
        (error: unknown) => {
          if (!latest.isLatest(generation) || token.isCancellationRequested) return;
          showError(error);
          pick.busy = false;
        },
      );
    }, SEARCH_DEBOUNCE_MS);
    disposables.push(
      pick.onDidChangeValue((value) => {
        if (value.trim() === '') {
          run.cancel();
          latest.cancel();
          pick.items = [];
          pick.busy = false;
          return;
        }
        pick.busy = true; // feedback from the first keystroke, before the debounce fires
        run(value);
      }),
      { dispose: () => run.cancel() },
    );
  }

  if (options.initial) {
    pick.busy = true;
    options.initial.then(
      (hits) => {
        showResult(
          hits.length
            ? hitsToItems(hits, { multiRoot: isMultiRoot(), alwaysShow: false })
            : [messageItem('No related sections in other notes')],
        );
        pick.busy = false;
      },
      (error: unknown) => {
        showError(error);
        pick.busy = false;
      },
    );
  }

  disposables.push(
    pick.onDidChangeActive((items) => {
      const hit = items[0]?.hit;
      if (!hit || isConvertedDocument(hit)) return; // a PDF is opened on Enter, not while browsing
      previewed = true;
      void openHit(hit, { preview: true, preserveFocus: true }).catch(() => undefined);
    }),
    pick.onDidAccept(() => {
      const hit = pick.selectedItems[0]?.hit;
      if (!hit) return; // informational rows do nothing
      accepted = true;
      pick.hide();
      openHit(hit, { preview: false, preserveFocus: false }).catch((error: unknown) => {
        void vscode.window.showErrorMessage(`mdsearch: cannot open ${hit.path}: ${String(error)}`);
      });
    }),
  );

  return new Promise((resolve) => {
    disposables.push(
      pick.onDidHide(() => {
        latest.cancel();
        for (const d of disposables) d.dispose();
        pick.dispose();
        if (!accepted && previewed) void restore().catch(() => undefined);
        resolve();
      }),
    );
    if (options.value) pick.value = options.value;
    pick.show();
  });
}

/** "Markdown Search: Search Notes". Starts with the editor's single-line selection, if any. */
export function searchNotes(backend: SearchBackend): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  const selected = editor && !editor.selection.isEmpty && editor.selection.isSingleLine
    ? editor.document.getText(editor.selection).trim()
    : '';
  const value = selected.length <= 200 ? selected : '';
  return showHitPick({
    title: 'Markdown Search',
    placeholder: 'Search notes by meaning (filters: tag:name path:folder/)',
    value,
    search: async (query, token) => {
      const args: SearchArgs = { query };
      return parseHits(await backend.execute(ServerCommands.search, [args], token));
    },
  });
}

/** "Markdown Search: Related Sections" for the section under the cursor, or for the section a
 * "3 related · 1 linked" lens or hint names (`given`: its uri, line, limit and threshold). */
export async function showRelated(backend: SearchBackend, given?: RelatedArgs): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  let args: RelatedArgs;
  if (given) {
    args = given;
  } else if (!editor || editor.document.languageId !== 'markdown' || editor.document.uri.scheme !== 'file') {
    void vscode.window.showInformationMessage('mdsearch: open a markdown note to see related sections.');
    return;
  } else {
    args = { uri: editor.document.uri.toString(), line: editor.selection.active.line };
  }
  const cts = new vscode.CancellationTokenSource();
  try {
    await showHitPick({
      title: 'Related Sections',
      placeholder: 'Sections from other notes related to the one under the cursor',
      initial: backend.execute(ServerCommands.related, [args], cts.token).then(parseHits),
    });
  } finally {
    cts.cancel();
    cts.dispose();
  }
}
