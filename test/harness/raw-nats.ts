/** A bare NATS protocol client on the lane's shared server: for bytes nats.js would never send. */
import { type Socket, connect as tcpConnect } from 'node:net';
import { sharedNats } from './bus.js';
import { eventually } from './eventually.js';

/** Connects, subscribes `subject` (sid 1) and waits for the server's PONG; `onData` sees everything the server sends after. */
export async function rawNatsClient(
  subject: string,
  onData: (chunk: string) => void = () => {},
): Promise<{ socket: Socket; received: () => string }> {
  const { servers, user, pass } = sharedNats();
  const url = new URL(String(servers).split(',')[0] as string);
  const socket = tcpConnect(Number(url.port), url.hostname);
  let text = '';
  let connected = false;
  socket.on('data', (chunk) => {
    const piece = chunk.toString('latin1');
    text += piece;
    if (connected) onData(piece);
  });
  await eventually(() => text.startsWith('INFO '));
  const auth = user === undefined ? {} : { user, pass };
  socket.write(
    `CONNECT ${JSON.stringify({ verbose: false, pedantic: false, headers: true, no_responders: true, protocol: 1, ...auth })}\r\n`,
  );
  socket.write(`SUB ${subject} 1\r\nPING\r\n`);
  await eventually(() => text.includes('PONG'));
  connected = true;
  return { socket, received: () => text };
}
