// The floor under the web figure (scripts/bench/floor.ts): the bare server answers as the service
// does (its headers, one answer per event), and the cost table says what the service adds to it.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type EventCost, medianCost, renderCost } from '../../scripts/bench/cost.js';
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

  it('reports each figure as the median of its rounds, and every round beside it', () => {
    const round = (webMs: number, postgresMs: number, storedBytes: number): EventCost => ({
      label: 'single requests at 64 connections',
      events: 50_000,
      webMs,
      postgresMs,
      walBytes: 1500,
      storedBytes,
      commits: 0.03,
    });
    // Each figure its own median: one slow round moves none of them.
    const single = medianCost([round(0.14, 0.06, 1000), round(0.09, 0.08, 1100), round(0.1, 0.07, 900)]);
    expect(single).toMatchObject({ webMs: 0.1, postgresMs: 0.07, storedBytes: 1000, events: 50_000 });
    expect(medianCost([round(0.1, 0.06, 1000), round(0.2, 0.08, 1100)]).webMs).toBeCloseTo(0.15);
    const batch = medianCost([round(0.02, 0.03, 1050), round(0.03, 0.03, 1050), round(0.01, 0.03, 1050)]);
    const text = renderCost([single, batch]);
    expect(text).toContain('the median of 3 rounds');
    expect(text).toContain('| web process CPU (user + system), ms | 0.100 (≤ 0.090) | 0.020 (≤ 0.015) |');
    expect(text).toContain('| 1 | 0.140 / 0.020 | 0.060 / 0.030 | 1,500 / 1,500 | 1,000 / 1,050 |');
    expect(text).toContain('| 3 | 0.100 / 0.010 | 0.070 / 0.030 | 1,500 / 1,500 | 900 / 1,050 |');
    // One round: no rounds table, no median named.
    const once = renderCost([medianCost([round(0.1, 0.06, 1000)]), medianCost([round(0.02, 0.03, 1000)])]);
    expect(once).not.toContain('median');
    expect(once).not.toContain('| round (single / batch)');
  });
});
