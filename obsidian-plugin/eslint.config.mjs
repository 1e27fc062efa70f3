// The community plugin review's own lint: eslint-plugin-obsidianmd's recommended rules (with
// typescript-eslint's type-checked ones), over what the plugin ships and builds it. Among them
// `no-unsupported-api` holds every Obsidian API the sources use to manifest.json's minAppVersion
// (it reads manifest.json from the folder eslint runs in: run it here, as `npm run lint` does).
// test/ is left out: it runs under Node against a stand-in `obsidian` module, is never shipped,
// and the app's rules (popout windows, UI wording) do not apply to it.
import { defineConfig } from 'eslint/config';
import obsidianmd from 'eslint-plugin-obsidianmd';
import tseslint from 'typescript-eslint';

export default defineConfig([
  { ignores: ['main.js', 'dist/**', 'out/**', 'test/**', 'node_modules/**'] },
  ...obsidianmd.configs.recommended,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['eslint.config.mjs', 'scripts/*.mjs', 'manifest.json'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
  },
  // The manifest the community list reads, by the plugin's own rule (the recommended set lints
  // code files only): required fields and types, no "obsidian" or "plugin" in id, name or
  // description, a description of 10-250 plain characters ending with a period.
  {
    files: ['manifest.json'],
    languageOptions: { parser: tseslint.parser, parserOptions: { extraFileExtensions: ['.json'] } },
    rules: { 'obsidianmd/validate-manifest': 'error' },
  },
]);
