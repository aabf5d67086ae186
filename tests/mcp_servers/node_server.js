// A minimal MCP server on Node.js (stdio, newline-delimited JSON-RPC) with one tool, `hello`:
// what `npx <some MCP server>` runs, without the network. Used by the service install test.
const readline = require("readline");
const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");
readline.createInterface({ input: process.stdin }).on("line", (line) => {
  const request = JSON.parse(line);
  const answer = (result) => send({ jsonrpc: "2.0", id: request.id, result });
  if (request.method === "initialize") {
    answer({
      protocolVersion: request.params.protocolVersion,
      capabilities: { tools: {} },
      serverInfo: { name: "node-hello", version: "1.0.0" },
    });
  } else if (request.method === "tools/list") {
    answer({ tools: [{ name: "hello", description: "Says hello.", inputSchema: { type: "object" } }] });
  } else if (request.method === "tools/call") {
    answer({ content: [{ type: "text", text: "hello from node" }] });
  } else if (request.method === "ping") {
    answer({});
  } else if (request.id !== undefined) {
    send({ jsonrpc: "2.0", id: request.id, error: { code: -32601, message: "no such method" } });
  }
});
