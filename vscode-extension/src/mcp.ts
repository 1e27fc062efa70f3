// `mdsearch mcp` offered to VS Code's agent as an MCP server definition (the
// mcpServerDefinitionProviders contribution, VS Code 1.101+). The API is looked up at run time,
// so an older VS Code (the engines field allows 1.90) activates the extension without it. Only
// type imports from `vscode`: the definitions and the guard are unit-tested in plain Node.
import type { CancellationToken, Disposable, Event } from 'vscode';

/** package.json's contributes.mcpServerDefinitionProviders[0].id. */
export const MCP_PROVIDER_ID = 'mdsearch';

/** An MCP server over stdio, as McpStdioServerDefinition takes it. */
export interface McpDefinition {
  label: string;
  command: string;
  args: string[];
}

/** One server for the folders mdsearch is on in this window, each a `--root`: the agent searches
 * the notes the editor indexes (the same index, as the two share the default settings). None
 * when mdsearch is not installed or no folder has it on. */
export function mcpDefinitions(program: string | undefined, folders: readonly string[]): McpDefinition[] {
  if (!program || folders.length === 0) return [];
  return [{ label: 'mdsearch', command: program, args: ['mcp', ...folders.flatMap((f) => ['--root', f])] }];
}

/** The parts of VS Code 1.101's API used here (absent from older @types/vscode). */
interface McpStdioServerDefinitionCtor {
  new (label: string, command: string, args?: string[]): unknown;
}
interface McpProvider {
  onDidChangeMcpServerDefinitions?: Event<void>;
  provideMcpServerDefinitions(token: CancellationToken): unknown[];
}
interface LmWithMcp {
  registerMcpServerDefinitionProvider(id: string, provider: McpProvider): Disposable;
}

/** Registers the provider when this VS Code has the API; undefined (and nothing done) when not.
 * VS Code 1.100 has the function as a proposal that throws for an extension without the
 * proposal's own contribution point: that counts as not having it. */
export function registerMcpProvider(
  api: unknown,
  definitions: () => McpDefinition[],
  onDidChange: Event<void>,
): Disposable | undefined {
  const v = api as { lm?: Partial<LmWithMcp>; McpStdioServerDefinition?: McpStdioServerDefinitionCtor };
  const register = v.lm?.registerMcpServerDefinitionProvider;
  const Definition = v.McpStdioServerDefinition;
  if (typeof register !== 'function' || typeof Definition !== 'function') return undefined;
  try {
    return register.call(v.lm, MCP_PROVIDER_ID, {
      onDidChangeMcpServerDefinitions: onDidChange,
      provideMcpServerDefinitions: () => definitions().map((d) => new Definition(d.label, d.command, d.args)),
    });
  } catch {
    return undefined;
  }
}
