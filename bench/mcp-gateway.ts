/**
 * The MCP gateway peer, in its own process: what a user would build instead of the dispatcher
 * with the project's MCP SDK. Streamable HTTP in (one stateful session, JSON responses: the
 * SDK's cheaper mode), an `echo` tool whose argument zod checks, and each call passed on over
 * stdio to the tool server of `mcp-server.ts` (a process of its own). Prints
 * `ready <port> <tool server pid>` once it listens.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

const upstream = new Client({ name: 'bench-gateway', version: '1.0.0' });
const stdio = new StdioClientTransport({
  command: process.execPath,
  args: [new URL('./mcp-server.js', import.meta.url).pathname],
  stderr: 'ignore',
});
await upstream.connect(stdio);

const server = new McpServer({ name: 'bench-gateway', version: '1.0.0' });
server.registerTool('echo', { description: 'echoes q', inputSchema: { q: z.string().min(1) } }, async ({ q }) => {
  const result = await upstream.callTool({ name: 'echo', arguments: { q } });
  return { content: result.content as { type: 'text'; text: string }[], isError: result.isError === true };
});
const transport = new StreamableHTTPServerTransport({
  sessionIdGenerator: () => randomUUID(),
  enableJsonResponse: true,
});
await server.connect(transport);

const http = createServer((req, res) => {
  void readJson(req).then(
    (body) => transport.handleRequest(req, res, body),
    () => res.writeHead(400).end(),
  );
});
http.keepAliveTimeout = 60_000;
http.listen(0, '127.0.0.1', () => {
  const address = http.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  process.stdout.write(`ready ${port} ${stdio.pid}\n`);
});
process.on('SIGTERM', () => void upstream.close().then(() => process.exit(0)));

/** The request's body as JSON (undefined when it has none). */
function readJson(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('error', reject);
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      try {
        resolve(text === '' ? undefined : JSON.parse(text));
      } catch (err) {
        reject(err);
      }
    });
  });
}
