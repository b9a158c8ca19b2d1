/** The MCP peer: an `echo` tool with a validated argument, served over stdio. */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'bench-echo', version: '1.0.0' });
server.registerTool('echo', { description: 'echoes q', inputSchema: { q: z.string().min(1) } }, async ({ q }) => ({
  content: [{ type: 'text', text: JSON.stringify({ q }) }],
}));
await server.connect(new StdioServerTransport());
