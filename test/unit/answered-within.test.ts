import { once } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answeredWithin } from '../../src/shared/answered-within.js';

/** Both ends of one local connection: what `server` writes waits on `client` until the loop reads it. */
let listener: Server;
let server: Socket;
let client: Socket;
beforeAll(async () => {
  listener = createServer();
  listener.listen(0, '127.0.0.1');
  await once(listener, 'listening');
  const accepted = once(listener, 'connection');
  client = connect((listener.address() as { port: number }).port, '127.0.0.1');
  [server] = (await accepted) as [Socket];
});
afterAll(async () => {
  client.destroy();
  server.destroy();
  listener.close();
  await once(listener, 'close');
});

const late = () => new Error('no answer in time');

describe('answeredWithin', () => {
  it('takes an answer that came in time while the event loop was blocked past the deadline', async () => {
    const reply = once(client, 'data').then(([chunk]) => String(chunk));
    const answer = answeredWithin(reply, 20, late);
    // Answered at once (the bytes are on the client's socket), then the loop stays busy far past
    // the 20 ms: the next turn starts with the expired timer and the reply still unread.
    server.write('pong');
    const until = performance.now() + 300;
    while (performance.now() < until) {}
    await expect(answer).resolves.toBe('pong');
  });

  it("gives late()'s error when nothing answers, not before the deadline", async () => {
    const started = performance.now();
    await expect(answeredWithin(new Promise(() => {}), 30, late)).rejects.toThrow('no answer in time');
    expect(performance.now() - started).toBeGreaterThanOrEqual(29);
  });

  it("passes the work's own error on", async () => {
    await expect(answeredWithin(Promise.reject(new Error('refused')), 1000, late)).rejects.toThrow('refused');
  });
});
