// What node's own HTTP work costs per event, beside the service's web CPU: a bare server
// (floor-server.mjs) answers the same requests, with the same load shape, as the cost stretches.
// The part of the web figure no change to the service's code can remove (docs/benchmarks.md).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { freePort } from '../local-services.js';
import { CLK_TCK, processTree } from './cpu.js';
import { batchesPaid, paidByCode, singlePaid, type Target } from './load.js';
import { options, root } from './options.js';

/** Headers node writes itself, or that describe this body only. */
const OWN_HEADERS = new Set([
  'date',
  'connection',
  'keep-alive',
  'content-length',
  'content-type',
  'transfer-encoding',
]);

/** A real single event's answer and the headers the service sent with it. */
async function realAnswer(
  service: Target,
  code: string,
): Promise<{ headers: [string, string][]; answer: unknown }> {
  const response = await fetch(`${service.url}/v1/events`, {
    method: 'POST',
    headers: service.headers,
    body: JSON.stringify(paidByCode(code)),
  });
  if (!response.ok) throw new Error(`the service answered ${response.status} to a new order.paid`);
  const headers = [...response.headers].filter(([name]) => !OWN_HEADERS.has(name.toLowerCase()));
  return { headers, answer: await response.json() };
}

export interface FloorCost {
  /** Web CPU per event of the bare server: [single requests at 64 connections, 500-event batches]. */
  webMs: [number, number];
}

export async function floorCost(service: Target, code: string): Promise<FloorCost> {
  const { headers, answer } = await realAnswer(service, code);
  const port = await freePort();
  const child = spawn(process.execPath, [join(root, 'scripts', 'bench', 'floor-server.mjs')], {
    env: {
      ...process.env,
      PORT: String(port),
      FLOOR_HEADERS: JSON.stringify(headers),
      FLOOR_ANSWER: JSON.stringify(answer),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`the floor server exited with ${code}`)));
      child.stdout!.once('data', () => resolve());
    });
    const floor = { url: `http://127.0.0.1:${port}`, headers: service.headers };
    const ticks = () => processTree(child.pid!).reduce((sum, p) => sum + p.ticks, 0);
    const msPer = (from: number, events: number) =>
      (((ticks() - from) / CLK_TCK) * 1000) / Math.max(events, 1);
    let from = ticks();
    const singles = await singlePaid(floor, code, 64, options.seconds);
    const single = msPer(from, singles.whole.ok);
    from = ticks();
    const batches = await batchesPaid(floor, code, 500, options.costBatches, 2);
    const batch = msPer(from, batches.whole.ok * 500);
    return { webMs: [single, batch] };
  } finally {
    child.kill('SIGTERM');
  }
}
