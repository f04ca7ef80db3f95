import { describe, expect, it } from 'vitest';
import { DeliveryFailed, deliveryBackoff, retryDelayMs } from '../../src/modules/webhooks/delivery.js';

describe('webhook delivery backoff', () => {
  it("waits until the delivery's next attempt, whatever BullMQ's own count says", () => {
    const now = Date.parse('2026-11-25T00:00:00Z');
    const failed = new DeliveryFailed('status 500', new Date(now + 250_000));
    expect(deliveryBackoff(failed, 1, 18_000, now)).toBe(250_000);
    expect(deliveryBackoff(new DeliveryFailed('late', new Date(now - 5)), 3, 18_000, now)).toBe(0);
  });

  it('backs off exponentially from the job delay for any other failure', () => {
    expect(deliveryBackoff(new Error('database down'), 1, 18_000)).toBe(18_000);
    expect(deliveryBackoff(new Error('database down'), 3, 18_000)).toBe(72_000);
    expect(deliveryBackoff(undefined, 2, 1_000)).toBe(2_000);
  });

  it('the schedule: after the n-th failure 18 s × 2^(n-1), less up to 20 %', () => {
    expect(retryDelayMs(18_000, 0.2, 1, 0)).toBe(18_000);
    expect(retryDelayMs(18_000, 0.2, 1, 1)).toBe(14_400);
    expect(retryDelayMs(18_000, 0.2, 5, 0)).toBe(288_000);
    expect(retryDelayMs(18_000, 0.2, 14, 0.5)).toBe(Math.floor(18_000 * 2 ** 13 * 0.9));
  });
});
