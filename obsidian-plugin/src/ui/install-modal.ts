// "Install mdsearch": says what will happen and where, then on the user's word installs the
// server into the plugin's private environment (client/install.ts), showing each step and the
// installers' output as it comes, and starts the server from it.
import { type App, Modal } from 'obsidian';
import type MdsearchPlugin from '../main';
import { PACKAGE } from '../client/install';
import { privateEnvDir } from '../client/locate';

/** Lines of installer output kept on screen (pip prints one a package). */
const LOG_LINES = 200;

export class InstallModal extends Modal {
  /** The last install's outcome, as shown: where the server is, or the error. */
  result: Promise<string> | undefined;

  constructor(app: App, private readonly plugin: MdsearchPlugin) {
    super(app);
  }

  override onOpen(): void {
    const { contentEl } = this;
    this.setTitle('Install mdsearch');
    contentEl.createEl('p', {
      text: `This installs the search server, the Python package ${PACKAGE}, into a private environment at ${privateEnvDir()}: `
        + 'outside every vault and shared by the vaults on this device. It uses uv when it finds it, else Python 3.10 or later '
        + 'with venv and pip, and downloads about 200 MB from PyPI (or from where your pip or uv settings say), about 500 MB installed. '
        + 'Installing again replaces it with the newest version.',
    });
    const stepEl = contentEl.createDiv({ cls: 'mdsearch-install-step' });
    const logEl = contentEl.createEl('pre', { cls: 'mdsearch-install-log' });
    const buttons = contentEl.createDiv({ cls: 'modal-button-container' });
    const install = buttons.createEl('button', { cls: 'mod-cta', text: 'Install' });
    const close = buttons.createEl('button', { text: 'Cancel' });
    close.addEventListener('click', () => this.close());
    let running = false;
    install.addEventListener('click', () => {
      if (running) return;
      running = true;
      install.disabled = true;
      close.setText('Close');
      stepEl.removeClass('mdsearch-error');
      const lines: string[] = [];
      this.result = this.plugin.installServer({
        onStep: (step) => stepEl.setText(step),
        onLog: (line) => {
          lines.push(line);
          if (lines.length > LOG_LINES) lines.shift();
          logEl.setText(lines.join('\n'));
        },
      }).then(
        (command) => `Installed. The server starts from ${command.command}.`,
        (error: unknown) => {
          install.disabled = false;
          stepEl.addClass('mdsearch-error');
          return `The install failed: ${error instanceof Error ? error.message : String(error)}`;
        },
      ).then((outcome) => {
        running = false;
        stepEl.setText(outcome);
        return outcome;
      });
    });
  }

  override onClose(): void {
    this.contentEl.empty();
  }
}
