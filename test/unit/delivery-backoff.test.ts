import { describe, expect, it } from 'vitest';
import { deliverySchedule, retryDelayMs } from '../../src/modules/webhooks/delivery.js';
import { EndpointPumps } from '../../src/modules/webhooks/endpoint-pumps.js';

describe('webhook delivery backoff', () => {
  it('the schedule: after the n-th failure 18 s × 2^(n-1), less up to 20 %', () => {
    expect(retryDelayMs(18_000, 0.2, 1, 0)).toBe(18_000);
    expect(retryDelayMs(18_000, 0.2, 1, 1)).toBe(14_400);
    expect(retryDelayMs(18_000, 0.2, 5, 0)).toBe(288_000);
    expect(retryDelayMs(18_000, 0.2, 14, 0.5)).toBe(Math.floor(18_000 * 2 ** 13 * 0.9));
  });

  it('15 attempts from 18 s with 20 % jitter add up to about 3 days, the first retry within 30 s', () => {
    const { attempts, backoffMs, jitter } = deliverySchedule;
    const waits = Array.from({ length: attempts - 1 }, (_, i) => backoffMs * 2 ** i);
    const most = waits.reduce((a, b) => a + b, 0) / 86_400_000;
    expect(attempts).toBe(15);
    expect(waits[0]).toBeLessThanOrEqual(30_000);
    expect(most * (1 - jitter)).toBeGreaterThan(2.5);
    expect(most).toBeLessThan(3.5);
  });
});

describe('one pump per endpoint per process', () => {
  it('a wake-up while the pump runs returns at once and makes it claim again; one after it stopped starts a new pump', async () => {
    const pumps = new EndpointPumps();
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const claims: string[] = [];
    const first = pumps.wake('b/e', async (session) => {
      claims.push('first');
      await held;
      while (session.claimAgain()) claims.push('again');
      return 'first done';
    });
    // Arrives while the pump waits on its batch: flags it, runs nothing of its own.
    expect(await pumps.wake('b/e', async () => 'second')).toBeNull();
    expect(await pumps.wake('b/e', async () => 'third')).toBeNull();
    // Another endpoint has its own pump.
    expect(await pumps.wake('b/other', async () => 'other')).toBe('other');
    release();
    expect(await first).toBe('first done');
    // Two wake-ups, one more claim: the flag says "claim again", not how often.
    expect(claims).toEqual(['first', 'again']);
    expect(pumps.size).toBe(0);
    expect(await pumps.wake('b/e', async () => 'next')).toBe('next');
  });

  it('a wake-up between the last claim and the release is never lost: the check and the release are one step', async () => {
    const pumps = new EndpointPumps();
    let runs = 0;
    const pump = async (session: { claimAgain(): boolean }) => {
      runs++;
      await Promise.resolve();
      // A wake-up from another job's promise chain lands right before the pump's last check.
      void pumps.wake('b/e', pump);
      return session.claimAgain() ? 'claimed again' : 'stopped';
    };
    expect(await pumps.wake('b/e', pump)).toBe('claimed again');
    expect(runs).toBe(1);
  });

  it('stopping: pumps are told, and a released endpoint is pumped afresh by its next wake-up', async () => {
    const pumps = new EndpointPumps();
    const seen = await pumps.wake('b/e', async (session) => {
      pumps.stop();
      const stopping = session.stopping;
      session.release();
      // Released: a wake-up now starts its own pump (this one only finishes its bookkeeping).
      expect(await pumps.wake('b/e', async () => 'new pump')).toBe('new pump');
      return stopping;
    });
    expect(seen).toBe(true);
  });
});
