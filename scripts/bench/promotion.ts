// `npm run bench -- --promotion`: what the web process promotes to V8's old generation per single
// (new attributed order.paid at 16 connections), summed from its `--trace-gc-nvp` lines, beside its
// RSS and CPU per request. Bytes promoted per request move less with the machine's load than CPU
// time and throughput: two builds compare on a shared machine, run by run in turns. Printed.
import { closeSync, openSync, readFileSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { CLK_TCK, processTree } from './cpu.js';
import { singlePaid } from './load.js';
import { fmt, log, options, tmpDir } from './options.js';
import { startServer, stopServer } from './server.js';
import type { Context } from './setup.js';

const CONNECTIONS = 16;
const WARM_UP_SECONDS = 5;

export interface PromotionRun {
  requests: number;
  rps: number;
  /** Sum of `promoted=` over every collection of the measured stretch, per 2xx answer. */
  promotedPerRequest: number;
  scavenges: number;
  scavengeMs: number;
  fullGcs: number;
  rssStartMb: number;
  rssEndMb: number;
  rssPeakMb: number;
  cpuUsPerRequest: number;
}

function treeTicks(pid: number): number {
  return processTree(pid).reduce((sum, p) => sum + p.ticks, 0);
}

function treeRssMb(pid: number): number {
  let kb = 0;
  for (const { pid: one } of processTree(pid)) {
    try {
      kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${one}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      // Gone.
    }
  }
  return kb / 1024;
}

function textBetween(file: string, from: number, to: number): string {
  const fd = openSync(file, 'r');
  try {
    const bytes = Buffer.alloc(to - from);
    readSync(fd, bytes, 0, bytes.length, from);
    return bytes.toString('utf8');
  } finally {
    closeSync(fd);
  }
}

export async function promotionRun(ctx: Context): Promise<PromotionRun> {
  const given = process.env.BENCH_SERVER_NODE_ARGS ?? '';
  process.env.BENCH_SERVER_NODE_ARGS = `--trace-gc-nvp ${given}`;
  const logFile = join(tmpDir, 'promotion-server.log');
  const server = await startServer(ctx.env, options.webConcurrency, logFile);
  process.env.BENCH_SERVER_NODE_ARGS = given;
  const target = { url: server.url, headers: ctx.headers };
  const code = ctx.seed.creators[0]!.coupon_code;
  try {
    await singlePaid(target, code, CONNECTIONS, WARM_UP_SECONDS);
    log(`singles at ${CONNECTIONS} connections for ${options.promotionSeconds} s, collections traced`);
    const from = statSync(logFile).size;
    const ticks = treeTicks(server.pid);
    const rssStartMb = treeRssMb(server.pid);
    let rssPeakMb = rssStartMb;
    const sampler = setInterval(() => {
      rssPeakMb = Math.max(rssPeakMb, treeRssMb(server.pid));
    }, 100);
    const run = await singlePaid(target, code, CONNECTIONS, options.promotionSeconds).finally(() =>
      clearInterval(sampler),
    );
    const cpuSeconds = (treeTicks(server.pid) - ticks) / CLK_TCK;
    const rssEndMb = treeRssMb(server.pid);
    let promoted = 0;
    let scavenges = 0;
    let scavengeMs = 0;
    let fullGcs = 0;
    for (const line of textBetween(logFile, from, statSync(logFile).size).split('\n')) {
      const kind = / gc=(\w+) /.exec(line)?.[1];
      if (!kind) continue;
      promoted += Number(/ promoted=(\d+)/.exec(line)?.[1] ?? 0);
      if (kind === 's') {
        scavenges += 1;
        scavengeMs += Number(/ pause=([\d.]+)/.exec(line)?.[1] ?? 0);
      } else fullGcs += 1;
    }
    const requests = run.whole.ok;
    return {
      requests,
      rps: run.whole.rps,
      promotedPerRequest: promoted / requests,
      scavenges,
      scavengeMs,
      fullGcs,
      rssStartMb,
      rssEndMb,
      rssPeakMb: Math.max(rssPeakMb, rssEndMb),
      cpuUsPerRequest: (cpuSeconds * 1e6) / requests,
    };
  } finally {
    await stopServer(server);
  }
}

export function renderPromotion(run: PromotionRun): string {
  return [
    `| singles (${CONNECTIONS} connections, ${options.promotionSeconds} s) | promoted / request | scavenges (pauses) | full GCs | web RSS start → end (peak) | web CPU / request |`,
    '|---|---:|---:|---:|---:|---:|',
    `| ${fmt(run.requests)} at ${fmt(run.rps)}/s | ${fmt(run.promotedPerRequest)} B | ${run.scavenges} (${fmt(run.scavengeMs)} ms) | ${run.fullGcs} | ${fmt(run.rssStartMb)} → ${fmt(run.rssEndMb)} MB (${fmt(run.rssPeakMb)}) | ${fmt(run.cpuUsPerRequest)} µs |`,
    '',
  ].join('\n');
}
