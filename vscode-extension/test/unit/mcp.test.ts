import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { MCP_PROVIDER_ID, mcpDefinitions, registerMcpProvider } from '../../src/mcp';

const PACKAGE = JSON.parse(readFileSync(join(__dirname, '../../../package.json'), 'utf8')) as {
  contributes: { mcpServerDefinitionProviders: { id: string }[] };
};
const never = (): { dispose(): void } => ({ dispose: () => undefined });

describe('mcpDefinitions', () => {
  it('runs `mdsearch mcp` with a --root for each folder mdsearch is on', () => {
    assert.deepEqual(mcpDefinitions('/home/ada/.local/bin/mdsearch', ['/notes', '/work/wiki']), [
      { label: 'mdsearch', command: '/home/ada/.local/bin/mdsearch', args: ['mcp', '--root', '/notes', '--root', '/work/wiki'] },
    ]);
  });

  it('offers nothing without the program or without a folder', () => {
    assert.deepEqual(mcpDefinitions(undefined, ['/notes']), []);
    assert.deepEqual(mcpDefinitions('/usr/bin/mdsearch', []), []);
  });
});

describe('registerMcpProvider', () => {
  class FakeDefinition {
    constructor(readonly label: string, readonly command: string, readonly args?: string[]) {}
  }

  it("registers under package.json's provider id and answers with stdio definitions (VS Code 1.101+)", () => {
    assert.deepEqual(PACKAGE.contributes.mcpServerDefinitionProviders.map((p) => p.id), [MCP_PROVIDER_ID]);
    const registered: { id: string; provider: { provideMcpServerDefinitions(token: unknown): unknown[] } }[] = [];
    const api = {
      lm: {
        registerMcpServerDefinitionProvider(id: string, provider: { provideMcpServerDefinitions(token: unknown): unknown[] }) {
          registered.push({ id, provider });
          return { dispose: () => undefined };
        },
      },
      McpStdioServerDefinition: FakeDefinition,
    };
    let folders = ['/notes'];
    const disposable = registerMcpProvider(api, () => mcpDefinitions('/bin/mdsearch', folders), never);
    assert.ok(disposable);
    assert.equal(registered[0]?.id, 'mdsearch');
    assert.deepEqual(registered[0]?.provider.provideMcpServerDefinitions(undefined), [
      new FakeDefinition('mdsearch', '/bin/mdsearch', ['mcp', '--root', '/notes']),
    ]);
    folders = [];
    assert.deepEqual(registered[0]?.provider.provideMcpServerDefinitions(undefined), []);
  });

  it('does nothing in a VS Code without the API (before 1.101)', () => {
    assert.equal(registerMcpProvider({ lm: {} }, () => [], never), undefined);
    assert.equal(registerMcpProvider({}, () => [], never), undefined);
  });

  it("does nothing where the function is 1.100's proposal, which throws", () => {
    const api = {
      lm: {
        registerMcpServerDefinitionProvider() {
          throw new Error('MCP configuration providers must be registered in the contributes.modelContextServerCollections array');
        },
      },
      McpStdioServerDefinition: FakeDefinition,
    };
    assert.equal(registerMcpProvider(api, () => [], never), undefined);
  });
});
