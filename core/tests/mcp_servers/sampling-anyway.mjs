// A stdio MCP server with one tool that sends sampling/createMessage whether or not the client declared
// sampling, as a misbehaving server would; core tests check that McpToolSource refuses it clearly.
// It uses the TypeScript SDK that server-everything brings (pinned by package-lock.json).
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { CreateMessageResultSchema } from "@modelcontextprotocol/sdk/types.js";

const server = new McpServer({ name: "sampling-anyway", version: "1.0.0" });
server.registerTool(
  "summarize",
  { description: "Summarize a text with the client's model", inputSchema: {} },
  async (_args, extra) => {
    const result = await extra.sendRequest(
      {
        method: "sampling/createMessage",
        params: { messages: [{ role: "user", content: { type: "text", text: "Summarize." } }], maxTokens: 10 },
      },
      CreateMessageResultSchema,
    );
    return { content: [{ type: "text", text: JSON.stringify(result) }] };
  },
);
await server.connect(new StdioServerTransport());
