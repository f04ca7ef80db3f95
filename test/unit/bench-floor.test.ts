// The floor under the web figure (scripts/bench/floor.ts): the bare server answers as the service
// does (its headers, one answer per event), and the cost table says what the service adds to it.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type EventCost, renderCost } from '../../scripts/bench/cost.js';
import { freePort } from '../../scripts/local-services.js';

const root = join(import.meta.dirname, '..', '..');
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
});

async function floorServer(headers: [string, string][], answer: unknown): Promise<string> {
  const port = await freePort();
  const child = spawn(process.execPath, [join(root, 'scripts', 'bench', 'floor-server.mjs')], {
    env: {
      PATH: process.env.PATH,
      PORT: String(port),
      FLOOR_HEADERS: JSON.stringify(headers),
      FLOOR_ANSWER: JSON.stringify(answer),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the floor server exited with ${code}`)));
    child.stdout!.once('data', () => resolve());
  });
  return `http://127.0.0.1:${port}`;
}

describe('bench: the bare server under the web figure', () => {
  it("answers a single event and each event of a batch with the service's answer and headers", async () => {
    const answer = { id: 'evt_1', object: 'event', status: 'accepted' };
    const url = await floorServer(
      [
        ['request-id', 'req_1'],
        ['ratelimit-limit', '100'],
      ],
      answer,
    );
    const post = (path: string, body: unknown) =>
      fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });

    const single = await post('/v1/events', { type: 'order.paid', data: { order_id: 'A-1' } });
    expect(single.status).toBe(200);
    expect(single.headers.get('request-id')).toBe('req_1');
    expect(single.headers.get('ratelimit-limit')).toBe('100');
    expect(single.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await single.json()).toEqual(answer);

    const events = Array.from({ length: 3 }, (_, i) => ({
      type: 'order.paid',
      data: { order_id: `B-${i}` },
    }));
    const batch = await post('/v1/events/batch', { events });
    expect(await batch.json()).toEqual([answer, answer, answer]);
  });

  it('puts its figure beside the web CPU and says what the service adds to it', () => {
    const cost = (webMs: number, floorWebMs: number): EventCost => ({
      label: 'x',
      events: 1000,
      webMs,
      postgresMs: 0.1,
      walBytes: 1500,
      storedBytes: 1000,
      commits: 0.03,
      floorWebMs,
    });
    const text = renderCost([cost(0.215, 0.106), cost(0.045, 0.003)]);
    expect(text).toContain(
      '| web CPU of a bare node HTTP server answering the same requests, ms | 0.106 | 0.003 |',
    );
    expect(text).toContain(
      'What the service adds to it is 0.109 ms a single event and 0.042 ms a batch event.',
    );
    // Without a floor measured (an older report's figures), no row and no sentence.
    const without = renderCost([
      { ...cost(0.2, 0), floorWebMs: undefined },
      { ...cost(0.04, 0), floorWebMs: undefined },
    ]);
    expect(without).not.toContain('bare node HTTP server');
  });
});
