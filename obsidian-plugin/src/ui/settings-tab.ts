// Settings → mdsearch. The executable is per device (local storage: a path differs between a
// laptop and a desktop, and data.json is synced with the vault); everything else is in data.json
// and reaches the running server at once. The index's location is shown so a user can see that
// it is outside the vault.
//
// The rows are declared once (name, description, how to draw the controls): Obsidian 1.13+ draws
// them itself from getSettingDefinitions(), which also puts them in its settings search; older
// versions call display(), which draws the same rows. No row redraws the tab: a button writes
// its answer into its own row.
import { type App, PluginSettingTab, Setting, type SettingDefinitionItem } from 'obsidian';
import type MdsearchPlugin from '../main';
import { checkServer } from '../client/check';
import { PACKAGE } from '../client/install';
import { locateServer, privateEnvDir } from '../client/locate';
import { InstallModal } from './install-modal';
import { BACKENDS, type Backend, MAX_RESULTS_RANGE, parseGlobLines, toServerSettings } from '../client/settings';

interface Row {
  name: string;
  desc: string;
  render: (setting: Setting) => void;
}

export class MdsearchSettingTab extends PluginSettingTab {
  /** Where the Test button writes its answer (in the executable's row, as last drawn). */
  private resultEl: HTMLElement | undefined;

  constructor(app: App, private readonly owner: MdsearchPlugin) {
    super(app, owner);
  }

  override getSettingDefinitions(): SettingDefinitionItem[] {
    return this.rows().map((row) => ({ name: row.name, desc: row.desc, render: (setting: Setting) => row.render(setting) }));
  }

  /** Obsidian before 1.13 (which does not know getSettingDefinitions) draws the tab here. */
  override display(): void {
    this.containerEl.empty();
    for (const row of this.rows()) row.render(new Setting(this.containerEl).setName(row.name).setDesc(row.desc));
  }

  private rows(): Row[] {
    const plugin = this.owner;
    const globs = (name: string, desc: string, key: 'include' | 'exclude'): Row => ({
      name,
      desc,
      render: (setting) => {
        setting.addTextArea((area) => area
          .setValue(plugin.settings[key].join('\n'))
          .onChange(async (value) => {
            plugin.settings[key] = parseGlobLines(value);
            await plugin.saveSettings();
          }));
      },
    });
    return [
      {
        name: 'Path to mdsearch',
        desc: 'The mdsearch program (or a Python that has mdsearch installed), on this device only. Empty: looked up through your login shell, as a terminal would, then in the usual install folders.',
        render: (setting) => {
          setting
            .addText((text) => text
              .setPlaceholder('/home/you/.local/bin/mdsearch')
              .setValue(plugin.executable)
              .onChange((value) => {
                plugin.executable = value.trim();
              }))
            .addButton((button) => button.setButtonText('Test').onClick(() => void this.test()))
            .addButton((button) => button.setButtonText('Use and restart').setCta().onClick(() => void plugin.setExecutable(plugin.executable)));
          this.resultEl = setting.descEl.createDiv({ cls: 'mdsearch-test-result' });
        },
      },
      {
        name: 'Install mdsearch',
        desc: `A private copy of the server (${PACKAGE} from PyPI) for this plugin, in ${privateEnvDir()}, outside every vault; made with uv, or with Python's venv and pip. Found when the path above is empty and nothing else is. Install again to update it.`,
        render: (setting) => {
          setting.addButton((button) => button.setButtonText('Install…').onClick(() => new InstallModal(this.app, plugin).open()));
        },
      },
      {
        name: 'Embedder backend',
        desc: 'How the model runs: onnx (the default), onnx-int8 (smaller and faster, nearly the same results) or torch (needs the torch extra).',
        render: (setting) => {
          setting.addDropdown((dropdown) => {
            for (const b of BACKENDS) dropdown.addOption(b, b);
            dropdown.setValue(plugin.settings.backend).onChange(async (value) => {
              plugin.settings.backend = value as Backend;
              await plugin.saveSettings();
            });
          });
        },
      },
      globs('Include', 'Notes to index, one gitignore-style glob a line. Empty: every note.', 'include'),
      globs('Exclude', `Notes to leave out, one glob a line, on top of ${this.app.vault.configDir}/, .trash/ and hidden folders.`, 'exclude'),
      {
        name: 'Results per search',
        desc: `How many sections a search shows (${MAX_RESULTS_RANGE.min}-${MAX_RESULTS_RANGE.max}).`,
        render: (setting) => {
          setting.addText((text) => text.setValue(String(plugin.settings.maxResults)).onChange(async (value) => {
            const n = Number(value.trim());
            if (!Number.isInteger(n) || n < MAX_RESULTS_RANGE.min || n > MAX_RESULTS_RANGE.max) return;
            plugin.settings.maxResults = n;
            await plugin.saveSettings();
          }));
        },
      },
      {
        name: 'Link suggestions by meaning',
        desc: 'Typing [[ lists the notes closest in meaning to the paragraph first. Off: the built-in list.',
        render: (setting) => {
          setting.addToggle((toggle) => toggle.setValue(plugin.settings.linkSuggest).onChange(async (value) => {
            plugin.settings.linkSuggest = value;
            await plugin.saveSettings();
          }));
        },
      },
      {
        name: 'Index',
        desc: 'Where the index is: outside the vault, so nothing is synced, and it can always be rebuilt from the notes.',
        render: (setting) => {
          const folders = plugin.serverStatus?.folders ?? [];
          setting.setDesc(folders.length
            ? `${folders.map((f) => f.index_dir).join(', ')} (outside the vault: nothing is synced, and it can always be rebuilt from the notes). ${plugin.statusView.text}`
            : plugin.statusView.text);
          setting
            .addButton((button) => button.setButtonText('Rebuild index').onClick(() => void plugin.rebuildIndex()))
            .addButton((button) => button.setButtonText('Restart server').onClick(() => void plugin.supervisor.restart()));
        },
      },
    ];
  }

  /** The Test button: where the executable is (setting or lookup) and whether its server starts
   * and loads the model, or the exact error. */
  async test(): Promise<string> {
    this.resultEl?.setText('Testing…');
    let result: string;
    try {
      const command = await locateServer({ setting: this.owner.executable });
      const check = await checkServer(command, { settings: toServerSettings(this.owner.settings) });
      result = check.ok
        ? `${check.version}, model loaded, at ${command.command} (${command.source === 'setting' ? 'from this setting' : `found through ${command.source}`})`
        : check.error;
    } catch (error) {
      result = error instanceof Error ? error.message : String(error);
    }
    this.resultEl?.setText(result);
    return result;
  }
}
