import { describe, expect, it } from 'vitest';
import { eventIdOf, eventIdRange, movementIdOf, newId, newRequestId } from '../../src/shared/ids.js';

describe('newId', () => {
  it('is prefixed, 26 base32 characters, unique and strictly increasing within a process', () => {
    const ids = Array.from({ length: 5000 }, () => newId('mv'));
    for (const id of ids) expect(id).toMatch(/^mv_[0-9a-hjkmnp-tv-z]{26}$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  it('draws fresh randomness every millisecond, past the 256 milliseconds one draw of its pool serves', () => {
    // The first id of each millisecond carries that millisecond's random part (its last digit
    // is 0 only by chance); a pool served twice, or not advanced, would repeat one.
    const randomParts = new Map<string, string>();
    while (randomParts.size < 300) {
      const id = newId('ord');
      const head = id.slice(4, 14);
      if (!randomParts.has(head)) randomParts.set(head, id.slice(14, 29));
    }
    expect(new Set(randomParts.values()).size).toBe(300);
  });
});

describe('request and event ids', () => {
  it("derive a request's event ids from its id, so its events are one key range", () => {
    const requests = Array.from({ length: 300 }, () => newRequestId());
    for (const id of requests) expect(id).toMatch(/^req_[0-9a-hjkmnp-tv-z]{24}00$/);
    expect(new Set(requests).size).toBe(requests.length);
    expect([...requests].sort()).toEqual(requests);
    const [request] = requests;
    const events = Array.from({ length: 500 }, (_, i) => eventIdOf(request!, i));
    expect(new Set(events).size).toBe(500);
    expect([...events].sort()).toEqual(events);
    const [low, high] = eventIdRange(request!)!;
    for (const id of events) {
      expect(id).toMatch(/^evt_[0-9a-hjkmnp-tv-z]{26}$/);
      expect(id >= low && id <= high).toBe(true);
    }
    // No other request's event, nor any id made meanwhile, falls in the range.
    const others = requests.slice(1).flatMap((r) => [eventIdOf(r, 0), eventIdOf(r, 499)]);
    const meanwhile = Array.from({ length: 100 }, () => eventIdOf('req_test', 0));
    for (const id of [...others, ...meanwhile]) expect(id >= low && id <= high).toBe(false);
  });

  it('give a request id of another form events with ids of their own, never one twice', () => {
    // Also right after a request id of the derivable form, and for an empty one.
    const request = newRequestId();
    expect(eventIdOf(request, 3)).toBe(`evt_${request.slice(4, 28)}03`);
    for (const other of ['', 'req_fixed', `${request}x`])
      expect(eventIdOf(other, 3)).toMatch(/^evt_[0-9a-hjkmnp-tv-z]{24}00$/);
    expect(eventIdOf(request, 4)).toBe(`evt_${request.slice(4, 28)}04`);
    const ids = Array.from({ length: 1000 }, () => eventIdOf('req_fixed', 0));
    expect(new Set(ids).size).toBe(1000);
    expect(eventIdRange('req_fixed')).toBeNull();
  });
});

describe('movement ids', () => {
  it("derive an event's movement ids from its id, 30 characters where a random one has 29", () => {
    const event = eventIdOf(newRequestId(), 7);
    const ids = Array.from({ length: 32 }, (_, i) => movementIdOf(event, i)!);
    expect(new Set(ids).size).toBe(32);
    for (const id of ids) {
      expect(id).toMatch(/^mv_[0-9a-hjkmnp-tv-z]{27}$/);
      // What movementEventIdSql reads back: 'evt_' || substr(id, 4, 26).
      expect(`evt_${id.slice(3, 29)}`).toBe(event);
    }
    expect(newId('mv')).toHaveLength(29);
  });

  it('are not derived past 32 movements of one event, or from an id of another form', () => {
    expect(movementIdOf(eventIdOf(newRequestId(), 0), 32)).toBeNull();
    expect(movementIdOf('evt_paid1', 0)).toBeNull();
  });
});
