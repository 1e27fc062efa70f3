// Entry point: wires the output channel, status bar, language client, commands and the MCP
// server definition together, and starts the server where mdsearch is on (an Obsidian vault, or
// a folder where `mdsearch.enable` is set), or when one of its commands is run.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { INSTALL_COMMAND, ServerManager } from './client';
import { mcpDefinitions, registerMcpProvider } from './mcp';
import { parseRelatedArgs, parseStatus, ServerCommands, SHOW_RELATED, type StatusParams } from './protocol';
import { searchNotes, showRelated } from './search';
import { isEnabled, needsRestart, serverSchema } from './settings';
import { describeFolder, FirstIndexNotice, StatusBar } from './status';

let manager: ServerManager | undefined;

const isVault = (folder: vscode.WorkspaceFolder): Promise<boolean> =>
  fs.promises.stat(path.join(folder.uri.fsPath, '.obsidian')).then((s) => s.isDirectory(), () => false);

/** The workspace folders mdsearch is on for. */
async function enabledFolders(): Promise<string[]> {
  const out: string[] = [];
  for (const folder of vscode.workspace.workspaceFolders ?? []) {
    const inspected = vscode.workspace.getConfiguration('mdsearch', folder.uri).inspect('enable');
    if (isEnabled(inspected, await isVault(folder))) out.push(folder.uri.fsPath);
  }
  return out;
}

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel('mdsearch', { log: true });
  const item = vscode.window.createStatusBarItem('mdsearch.status', vscode.StatusBarAlignment.Left, 10);
  item.name = 'Markdown Search';
  const statusBar = new StatusBar(item, { errorBackground: new vscode.ThemeColor('statusBarItem.errorBackground') });
  const envDir = path.join(context.globalStorageUri.fsPath, 'env');
  const server = new ServerManager(output, serverSchema(context.extension.packageJSON), envDir);
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

  // Where mdsearch is on; the server runs while any folder is (or since a command asked for it).
  let enabled: string[] = [];
  const mcpChanged = new vscode.EventEmitter<void>();
  const sync = async (): Promise<void> => {
    const now = await enabledFolders();
    const was = enabled;
    enabled = now;
    if (now.join('\n') !== was.join('\n')) mcpChanged.fire();
    if (now.length > 0) {
      await server.start();
    } else if (was.length > 0) {
      output.info('mdsearch is off for every folder of this window; stopping the server.');
      await server.stop();
      statusBar.update({ kind: 'off' });
    }
  };

  context.subscriptions.push(
    output,
    item,
    server,
    mcpChanged,
    server.onStatus((status) => {
      statusBar.update(status);
      if (status.kind === 'server') notice.update(status.status);
      else notice.update(undefined);
    }),
    server.onProgram(() => mcpChanged.fire()),
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
    vscode.commands.registerCommand(INSTALL_COMMAND, () => server.install()),
    vscode.commands.registerCommand('mdsearch.enableFolder', async () => {
      const folders = vscode.workspace.workspaceFolders ?? [];
      const folder = folders.length === 1
        ? folders[0]
        : await vscode.window.showWorkspaceFolderPick({ placeHolder: 'Folder to turn mdsearch on for' });
      if (!folder) return;
      await vscode.workspace
        .getConfiguration('mdsearch', folder.uri)
        .update('enable', true, vscode.ConfigurationTarget.WorkspaceFolder);
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('mdsearch.enable')) void sync();
      if (needsRestart(e)) {
        output.info('mdsearch.server.path changed; restarting the server soon.');
        server.scheduleRestart();
      }
    }),
    vscode.workspace.onDidChangeWorkspaceFolders(() => void sync()),
  );
  // VS Code 1.101+: `mdsearch mcp` on the folders mdsearch is on, for the agent's tools.
  const mcp = registerMcpProvider(vscode, () => mcpDefinitions(server.programPath, enabled), mcpChanged.event);
  if (mcp) context.subscriptions.push(mcp);
  else output.info(`No MCP server for the agent: VS Code ${vscode.version} has no MCP server definition API (1.101+).`);

  // Not awaited: activation must not wait for the file system or the server (commands are
  // registered above and work meanwhile).
  void sync();
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
  rows.push({ label: '$(output) Show logs', description: `${server.programPath ?? 'mdsearch'}${pid}` });
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
