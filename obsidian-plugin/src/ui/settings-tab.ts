// Settings → mdsearch. The executable is per device (local storage: a path differs between a
// laptop and a desktop, and data.json is synced with the vault); everything else is in data.json
// and reaches the running server at once. The index's location is shown so a user can see that
// it is outside the vault.
import { type App, PluginSettingTab, Setting } from 'obsidian';
import type MdsearchPlugin from '../main';
import { checkVersion, locateServer } from '../client/locate';
import { BACKENDS, type Backend, MAX_RESULTS_RANGE, parseGlobLines } from '../client/settings';

export class MdsearchSettingTab extends PluginSettingTab {
  /** The Test button's last answer (the settings tab re-renders from scratch). */
  testResult = '';

  constructor(app: App, private readonly owner: MdsearchPlugin) {
    super(app, owner);
  }

  override display(): void {
    const { containerEl } = this;
    const plugin = this.owner;
    containerEl.empty();

    const exe = new Setting(containerEl)
      .setName('mdsearch executable')
      .setDesc('Path of the `mdsearch` program (or of a Python that has mdsearch installed), on this device only. Empty: looked up through your login shell, as a terminal would.')
      .addText((text) => text
        .setPlaceholder('/home/you/.local/bin/mdsearch')
        .setValue(plugin.executable)
        .onChange((value) => {
          plugin.executable = value.trim();
        }));
    exe.addButton((button) => button.setButtonText('Test').onClick(() => void this.test()));
    exe.addButton((button) => button.setButtonText('Use and restart').setCta().onClick(async () => {
      await plugin.setExecutable(plugin.executable);
      this.display();
    }));
    if (this.testResult) containerEl.createDiv({ cls: 'mdsearch-test-result', text: this.testResult });

    new Setting(containerEl)
      .setName('Embedder backend')
      .setDesc('How the model runs. onnx is the default; onnx-int8 is smaller and faster with nearly the same results; torch needs the torch extra.')
      .addDropdown((dropdown) => {
        for (const b of BACKENDS) dropdown.addOption(b, b);
        dropdown.setValue(plugin.settings.backend).onChange(async (value) => {
          plugin.settings.backend = value as Backend;
          await plugin.saveSettings();
        });
      });

    const globs = (name: string, desc: string, key: 'include' | 'exclude'): void => {
      new Setting(containerEl).setName(name).setDesc(desc).addTextArea((area) => area
        .setValue(plugin.settings[key].join('\n'))
        .onChange(async (value) => {
          plugin.settings[key] = parseGlobLines(value);
          await plugin.saveSettings();
        }));
    };
    globs('Include', 'Notes to index, one gitignore-style glob a line. Empty: every note.', 'include');
    globs('Exclude', 'Notes to leave out, one glob a line, on top of .obsidian/, .trash/ and hidden folders.', 'exclude');

    new Setting(containerEl)
      .setName('Results per search')
      .setDesc(`How many sections a search shows (${MAX_RESULTS_RANGE.min}-${MAX_RESULTS_RANGE.max}).`)
      .addText((text) => text.setValue(String(plugin.settings.maxResults)).onChange(async (value) => {
        const n = Number(value.trim());
        if (!Number.isInteger(n) || n < MAX_RESULTS_RANGE.min || n > MAX_RESULTS_RANGE.max) return;
        plugin.settings.maxResults = n;
        await plugin.saveSettings();
      }));

    new Setting(containerEl)
      .setName('Link suggestions by meaning')
      .setDesc('Typing [[ lists the notes closest in meaning to the paragraph first. Off: Obsidian\'s own list.')
      .addToggle((toggle) => toggle.setValue(plugin.settings.linkSuggest).onChange(async (value) => {
        plugin.settings.linkSuggest = value;
        await plugin.saveSettings();
      }));

    const folders = plugin.serverStatus?.folders ?? [];
    new Setting(containerEl)
      .setName('Index')
      .setDesc(folders.length
        ? `${folders.map((f) => f.index_dir).join(', ')} (outside the vault: nothing is synced, and it can always be rebuilt from the notes). ${plugin.statusView.text}`
        : plugin.statusView.text)
      .addButton((button) => button.setButtonText('Rebuild index').onClick(() => void plugin.rebuildIndex()))
      .addButton((button) => button.setButtonText('Restart server').onClick(async () => {
        await plugin.supervisor.restart();
        this.display();
      }));
  }

  /** The Test button: where the executable is (setting or lookup) and its `--version`, or the
   * exact error. */
  async test(): Promise<string> {
    try {
      const command = await locateServer({ setting: this.owner.executable });
      const result = await checkVersion(command);
      this.testResult = result.ok
        ? `${result.version} at ${command.command} (${command.source === 'setting' ? 'from this setting' : `found through ${command.source}`})`
        : result.error;
    } catch (error) {
      this.testResult = error instanceof Error ? error.message : String(error);
    }
    this.display();
    return this.testResult;
  }
}
