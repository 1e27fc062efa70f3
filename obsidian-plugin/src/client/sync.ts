// Obsidian's vault and editor events as LSP notifications, so the index follows the vault and
// a saved note is searchable within a second. Paths are vault-relative with "/" (as Obsidian
// gives them). One note at a time is "open" on the server (the active editor's): its buffer is
// what related sections, `[[` completion and mention hints read, unsaved edits included.
// No `obsidian` import: the plugin's event handlers call these methods, and tests call them on a
// real server.
import * as path from 'node:path';
import { fileUri, type LspClient } from './lsp';

export function isNote(file: string): boolean {
  return /\.(md|markdown)$/i.test(file);
}

export class VaultSync {
  private openPath: string | undefined;
  private openText = '';

  /** `client` is asked each time: after a restart the events go to the new server. */
  constructor(private readonly root: string, private readonly client: () => LspClient | undefined) {}

  uri(vaultPath: string): string {
    return fileUri(path.join(this.root, ...vaultPath.split('/')));
  }

  get activePath(): string | undefined {
    return this.openPath;
  }

  /** The active editor shows `vaultPath` (undefined: no note). Closes the previous one. */
  open(vaultPath: string | undefined, text: string): void {
    const client = this.client();
    if (this.openPath !== undefined && this.openPath !== vaultPath) {
      client?.didClose(this.uri(this.openPath));
      this.openPath = undefined;
    }
    if (vaultPath === undefined || !isNote(vaultPath)) return;
    if (this.openPath === vaultPath) {
      this.edit(vaultPath, text);
      return;
    }
    this.openPath = vaultPath;
    this.openText = text;
    client?.didOpen(this.uri(vaultPath), text);
  }

  /** The buffer of the open note changed (typing, before any save). */
  edit(vaultPath: string, text: string): void {
    if (vaultPath !== this.openPath || text === this.openText) return;
    this.openText = text;
    this.client()?.didChange(this.uri(vaultPath), text);
  }

  /** A note was written to disk (Obsidian's `modify`): the open one is a save of its buffer,
   * another one a file change on disk (sync, another app, a plugin). */
  modify(vaultPath: string, text?: string): void {
    if (!isNote(vaultPath)) return;
    const client = this.client();
    if (vaultPath === this.openPath) {
      if (text !== undefined) this.edit(vaultPath, text);
      client?.didSave(this.uri(vaultPath));
    } else {
      client?.didChangeWatchedFiles([{ uri: this.uri(vaultPath), type: 2 }]);
    }
  }

  /** A note or folder appeared (folders are rescanned by the server). */
  create(vaultPath: string, isFolder = false): void {
    if (!isFolder && !isNote(vaultPath)) return;
    this.client()?.didChangeWatchedFiles([{ uri: this.uri(vaultPath), type: 1 }]);
  }

  /** A note or folder went away (a folder drops every note under it). */
  delete(vaultPath: string, isFolder = false): void {
    if (!isFolder && !isNote(vaultPath)) return;
    const client = this.client();
    if (vaultPath === this.openPath || (isFolder && this.openPath?.startsWith(`${vaultPath}/`))) {
      if (this.openPath) client?.didClose(this.uri(this.openPath));
      this.openPath = undefined;
    }
    client?.didChangeWatchedFiles([{ uri: this.uri(vaultPath), type: 3 }]);
  }

  /** A note or folder moved: `workspace/didRenameFiles`; the open note is reopened under its
   * new name. A note renamed to a non-note (or back) is a delete (or a create). */
  rename(vaultPath: string, oldPath: string, isFolder = false): void {
    const client = this.client();
    if (!isFolder && !isNote(vaultPath)) {
      this.delete(oldPath);
      return;
    }
    if (!isFolder && !isNote(oldPath)) {
      this.create(vaultPath);
      return;
    }
    let reopen: string | undefined;
    if (this.openPath === oldPath) reopen = vaultPath;
    else if (isFolder && this.openPath?.startsWith(`${oldPath}/`)) reopen = vaultPath + this.openPath.slice(oldPath.length);
    if (reopen !== undefined && this.openPath !== undefined) {
      client?.didClose(this.uri(this.openPath));
      this.openPath = undefined;
    }
    client?.didRenameFiles([{ oldUri: this.uri(oldPath), newUri: this.uri(vaultPath) }]);
    if (reopen !== undefined) this.open(reopen, this.openText);
  }

  /** A new server (after a restart) knows no open document: send the active one again. */
  reattach(): void {
    const client = this.client();
    if (this.openPath !== undefined && client && !client.isOpen(this.uri(this.openPath))) {
      client.didOpen(this.uri(this.openPath), this.openText);
    }
  }
}
