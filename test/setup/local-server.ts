import { once } from 'node:events';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens on 127.0.0.1 at a free port; the base URL (origin) without a trailing slash. */
export async function listen(server: Server): Promise<string> {
  if (!server.listening) {
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
  }
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A server for `handler` on a free port of 127.0.0.1, and its origin. */
export async function listenLocally(handler: RequestListener): Promise<{ server: Server; origin: string }> {
  const server = createServer(handler);
  return { server, origin: await listen(server) };
}

/** Stops accepting, drops open (keep-alive or hanging) connections, and waits for the close. */
export async function closeServer(server: Server | undefined): Promise<void> {
  if (!server?.listening) return;
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await closed;
}
