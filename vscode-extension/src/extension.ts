// Entry point: wires the output channel, status bar, language client and commands together.
import * as vscode from 'vscode';
import { readServerInfo, ServerManager } from './client';
import { parseRelatedArgs, parseStatus, ServerCommands, SHOW_RELATED, type StatusParams } from './protocol';
import { searchNotes, showRelated } from './search';
import { needsRestart, serverSchema } from './settings';
import { describeFolder, FirstIndexNotice, StatusBar } from './status';

let manager: ServerManager | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const info = readServerInfo(context.extension.packageJSON);
  const output = vscode.window.createOutputChannel('mdsearch', { log: true });
  const item = vscode.window.createStatusBarItem('mdsearch.status', vscode.StatusBarAlignment.Left, 10);
  item.name = 'Markdown Search';
  const statusBar = new StatusBar(item, { errorBackground: new vscode.ThemeColor('statusBarItem.errorBackground') });
  const server = new ServerManager(info, output, serverSchema(context.extension.packageJSON));
  manager = server;

  const INDEXED_KEY = 'mdsearch.indexedOnce';
  const notice = new FirstIndexNotice(
    (task) =>
      void vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: 'mdsearch: indexing notes', cancellable: false },
        (progress) => task((p) => progress.report(p)),
      ),
    () => context.workspaceState.get<boolean>(INDEXED_KEY, false),
    () => void context.workspaceState.update(INDEXED_KEY, true),
  );

  context.subscriptions.push(
    output,
    item,
    server,
    server.onStatus((status) => {
      statusBar.update(status);
      if (status.kind === 'server') notice.update(status.status);
      else notice.update(undefined);
    }),
    vscode.commands.registerCommand('mdsearch.searchNotes', () => searchNotes(server)),
    // From the palette: the section under the cursor; from a lens or an inlay hint: its section.
    vscode.commands.registerCommand(SHOW_RELATED, (args?: unknown) => showRelated(server, parseRelatedArgs(args))),
    vscode.commands.registerCommand('mdsearch.reindexWorkspace', async () => {
      try {
        await server.execute(ServerCommands.reindex, [{}]);
        void vscode.window.setStatusBarMessage('mdsearch: reindexing started', 3000);
      } catch (error) {
        void showServerError('reindex', error, output);
      }
    }),
    vscode.commands.registerCommand('mdsearch.showStatus', () => showStatus(server, output)),
    vscode.commands.registerCommand('mdsearch.restartServer', () => server.restart()),
    vscode.commands.registerCommand('mdsearch.showLogs', () => output.show()),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (needsRestart(e)) {
        output.info('The interpreter setting changed; restarting the server soon.');
        server.scheduleRestart();
      }
    }),
  );

  // Not awaited: activation must not wait for Python (a slow or missing interpreter would block
  // every command registration above).
  void server.start();
}

export async function deactivate(): Promise<void> {
  await manager?.dispose();
  manager = undefined;
}

async function showServerError(what: string, error: unknown, output: vscode.LogOutputChannel): Promise<void> {
  const message = `mdsearch: ${what} failed: ${error instanceof Error ? error.message : String(error)}`;
  output.error(message);
  const choice = await vscode.window.showErrorMessage(message, 'Show logs', 'Restart server');
  if (choice === 'Show logs') output.show();
  else if (choice === 'Restart server') await vscode.commands.executeCommand('mdsearch.restartServer');
}

/** "Markdown Search: Show Index Status": one row per workspace folder. */
async function showStatus(server: ServerManager, output: vscode.LogOutputChannel): Promise<void> {
  let status: StatusParams | undefined;
  try {
    status = parseStatus(await server.execute(ServerCommands.status, []));
  } catch (error) {
    await showServerError('status', error, output);
    return;
  }
  if (!status) {
    void vscode.window.showWarningMessage('mdsearch: the server sent no status.');
    return;
  }
  type Row = vscode.QuickPickItem & { indexDir?: string };
  const rows: Row[] = status.folders.map((f) => ({ ...describeFolder(f), indexDir: f.index_dir ?? undefined }));
  const pid = status.pid !== undefined ? ` · server pid ${status.pid}` : '';
  rows.push({ label: '$(output) Show logs', description: `python: ${server.pythonPath ?? 'unknown'}${pid}` });
  const choice = await vscode.window.showQuickPick(rows, {
    title: `Markdown Search: ${status.state}`,
    placeHolder: 'Select a folder to copy its index location',
    matchOnDescription: true,
    matchOnDetail: true,
  });
  if (!choice) return;
  if (choice.indexDir) {
    await vscode.env.clipboard.writeText(choice.indexDir);
    void vscode.window.setStatusBarMessage(`mdsearch: copied ${choice.indexDir}`, 3000);
  } else {
    output.show();
  }
}
