// A second, independent MCP client: the official TypeScript SDK (@modelcontextprotocol/sdk)
// starts `mdsearch mcp` (or reaches one over streamable HTTP), lists its tools, waits for the
// index and calls search_markdown once.
//   node client.mjs '["python", "-m", "mdsearch_ls", "mcp", "--root", "VAULT"]' "QUERY"
//   MDSEARCH_TOKEN=... node client.mjs http://127.0.0.1:PORT/mcp "QUERY"
// Prints one JSON object on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const query = process.argv[3];
let transport;
if (process.argv[2].startsWith("http")) {
  const headers = process.env.MDSEARCH_TOKEN ? { Authorization: `Bearer ${process.env.MDSEARCH_TOKEN}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(process.argv[2]), { requestInit: { headers } });
} else {
  const [command, ...args] = JSON.parse(process.argv[2]);
  transport = new StdioClientTransport({ command, args, env: { ...process.env }, stderr: "inherit" });
}
const client = new Client({ name: "mdsearch-node-test", version: "1.0.0" });
await client.connect(transport);
const tools = await client.listTools();
const deadline = Date.now() + 400_000;
for (;;) {
  const st = await client.callTool({ name: "index_status", arguments: {} });
  const sc = st.structuredContent;
  if (sc.index.state === "ready" && sc.model.state === "loaded") break;
  if (Date.now() > deadline) throw new Error(`not ready: ${JSON.stringify(sc)}`);
  await new Promise((resolve) => setTimeout(resolve, 500));
}
const result = await client.callTool({ name: "search_markdown", arguments: { q: query, k: 3 } }, undefined, { timeout: 300_000 });
console.log(JSON.stringify({
  server: client.getServerVersion(),
  instructions: client.getInstructions(),
  tools: tools.tools.map((t) => t.name),
  isError: result.isError ?? false,
  structured: result.structuredContent,
  text: result.content[0].text,
}));
await client.close();
