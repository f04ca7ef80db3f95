import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  OCCURRED_AT_MAX_FUTURE_MS,
  OCCURRED_AT_MAX_PAST_MS,
  type ValidateEventOptions,
  validateBatchEnvelope,
  validateEvent,
} from '../../src/modules/events/event-validation.js';
import {
  browserEventTypes,
  eventTypes,
  supportedCurrencies,
} from '../../src/modules/events/events.schemas.js';
import { AppError, type ErrorCode } from '../../src/shared/errors.js';

const now = new Date('2026-11-22T00:00:00.000Z');
const secret: ValidateEventOptions = { now, keyKind: 'secret' };
const publishable: ValidateEventOptions = { now, keyKind: 'publishable' };
const hash64 = 'ab'.repeat(32);

function paid(data: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) {
  return { type: 'order.paid', data: { order_id: 'ord_1', amount: 12900, ...data }, ...extra };
}

function errorOf(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('expected an AppError, but validation passed');
}

function expectError(
  input: unknown,
  code: ErrorCode,
  param: string | undefined,
  opts: ValidateEventOptions = secret,
): AppError {
  const err = errorOf(() => validateEvent(input, opts));
  expect({ code: err.code, param: err.details.param }).toEqual({ code, param });
  expect(err.message.length).toBeGreaterThan(10);
  return err;
}

/** The JSON the error handler would render, plus the stack: nothing may echo the value. */
function serialised(err: AppError): string {
  return JSON.stringify({ ...err, message: err.message, details: err.details, stack: err.stack });
}

describe('validateEvent: accepted events and normalisation', () => {
  it('accepts a minimal order.paid with defaults', () => {
    const event = validateEvent(paid(), secret);
    expect(event).toEqual({
      type: 'order.paid',
      occurredAt: now,
      data: {
        orderId: 'ord_1',
        amount: 12900,
        currency: 'KRW',
        fxRate: null,
        clickRef: null,
        couponCode: null,
        parentOrderId: null,
        refundId: null,
        reason: null,
        lastTouchChannel: null,
        customerHash: null,
        items: null,
      },
    });
    expect(event.occurredAt).not.toBe(now); // a copy, not the caller's Date
  });

  it('normalises currency, fx_rate, customer_hash and items, and reads null as absent', () => {
    const event = validateEvent(
      paid({
        currency: 'usd',
        fx_rate: '1350.50',
        customer_hash: 'ABCDEF'.repeat(10).slice(0, 64),
        coupon_code: 'SUMMER',
        click_ref: null,
        reason: null,
        items: [{ sku: 'S1', name: 'Shirt', quantity: 2, amount: 1999 }, { sku: null }],
      }),
      secret,
    );
    expect(event.data).toMatchObject({
      currency: 'USD',
      fxRate: '1350.5',
      customerHash: 'abcdef'.repeat(10).slice(0, 64),
      couponCode: 'SUMMER',
      clickRef: null,
      reason: null,
      items: [
        { sku: 'S1', name: 'Shirt', quantity: 2, amount: 1999 },
        { sku: null, name: null, quantity: null, amount: null },
      ],
    });
  });

  it('accepts every event type with a secret key and the browser types with a publishable key', () => {
    const full = { order_id: 'o', refund_id: 'r', amount: 1 };
    for (const type of eventTypes) {
      expect(validateEvent({ type, data: full }, secret).type).toBe(type);
    }
    for (const type of browserEventTypes) {
      expect(validateEvent({ type, data: full }, publishable).type).toBe(type);
    }
  });

  it('accepts browser signals without data, and data: null as absent', () => {
    expect(validateEvent({ type: 'page.viewed' }, publishable).data.orderId).toBeNull();
    expect(validateEvent({ type: 'page.viewed', data: null, occurred_at: null }, secret).occurredAt).toEqual(
      now,
    );
  });

  it('exports the eight types in spec order and the supported currencies with minor units', () => {
    expect(eventTypes).toEqual([
      'order.paid',
      'refund.created',
      'order.cancelled',
      'order.confirmed',
      'page.viewed',
      'product.viewed',
      'cart.item_added',
      'order.observed',
    ]);
    expect(supportedCurrencies).toEqual({ KRW: 0, JPY: 0, USD: 2, EUR: 2, GBP: 2 });
  });
});

describe('1. the event is not an object → invalid_request_body', () => {
  it.each([null, [], 'order.paid', 42, true])('rejects %j', (input) => {
    expectError(input, 'invalid_request_body', undefined);
  });

  it('names the event in a batch', () => {
    expectError([], 'invalid_request_body', 'events[3]', { ...secret, paramPrefix: 'events[3].' });
  });
});

describe('2. unknown top-level field → invalid_request_body', () => {
  it('names the field', () => {
    expectError(paid({}, { order_id: 'x' }), 'invalid_request_body', 'order_id');
  });

  it('names the field with the batch prefix', () => {
    expectError(paid({}, { livemode: true }), 'invalid_request_body', 'events[3].livemode', {
      ...secret,
      paramPrefix: 'events[3].',
    });
  });
});

describe('3. type', () => {
  it('missing or null → missing_required_field', () => {
    expectError({ data: { order_id: 'o' } }, 'missing_required_field', 'type');
    expectError({ type: null }, 'missing_required_field', 'type');
  });

  it.each([42, {}, ['order.paid'], false])('not a string (%j) → invalid_request_body', (type) => {
    expectError({ type }, 'invalid_request_body', 'type');
  });

  it('40 characters is an (unknown) type, 41 is a schema violation', () => {
    expectError({ type: 'x'.repeat(40) }, 'unknown_event_type', 'type');
    expectError({ type: 'x'.repeat(41) }, 'invalid_request_body', 'type');
  });

  it('unknown → unknown_event_type with every type in hint', () => {
    for (const type of ['order.created', 'Order.Paid', '', 'order.paid ']) {
      const err = expectError({ type }, 'unknown_event_type', 'type');
      for (const t of eventTypes) expect(err.details.hint).toContain(t);
    }
  });
});

describe('4. publishable key with a settlement type → event_type_not_allowed_for_publishable_key', () => {
  it.each(['order.paid', 'refund.created', 'order.cancelled', 'order.confirmed'])('%s', (type) => {
    const err = expectError(
      { type, data: { order_id: 'o', amount: 1, refund_id: 'r' } },
      'event_type_not_allowed_for_publishable_key',
      'type',
      publishable,
    );
    expect(err.status).toBe(403);
  });
});

describe('5. data schema → invalid_request_body with the full path', () => {
  it('data not an object', () => {
    expectError({ type: 'order.paid', data: [] }, 'invalid_request_body', 'data');
    expectError({ type: 'order.paid', data: 'x' }, 'invalid_request_body', 'data');
  });

  it('unknown fields in data and in items, with exact params', () => {
    expectError(paid({ ammount: 1 }), 'invalid_request_body', 'data.ammount');
    expectError(
      paid({ items: [{ sku: 'a' }, { sku: 'b', colour: 'red' }] }),
      'invalid_request_body',
      'data.items[1].colour',
    );
    expectError(
      paid({ items: [{ sku: 'a', price: 1 }] }),
      'invalid_request_body',
      'events[7].data.items[0].price',
      {
        ...secret,
        paramPrefix: 'events[7].',
      },
    );
  });

  it('unknown fields are rejected even when their value is null', () => {
    expectError(paid({ extra: null }), 'invalid_request_body', 'data.extra');
  });

  it('items must be an array of objects', () => {
    expectError(paid({ items: {} }), 'invalid_request_body', 'data.items');
    expectError(paid({ items: ['sku'] }), 'invalid_request_body', 'data.items[0]');
  });

  const stringLimits: [string, number][] = [
    ['order_id', 120],
    ['parent_order_id', 120],
    ['click_ref', 64],
    ['refund_id', 64],
    ['coupon_code', 40],
    ['reason', 200],
    ['last_touch_channel', 32],
  ];
  it.each(stringLimits)('data.%s: %i characters pass, one more fails', (field, max) => {
    expect(() => validateEvent(paid({ [field]: 'x'.repeat(max) }), secret)).not.toThrow();
    expectError(paid({ [field]: 'x'.repeat(max + 1) }), 'invalid_request_body', `data.${field}`);
    expectError(paid({ [field]: 123 }), 'invalid_request_body', `data.${field}`);
  });

  it.each([
    ['sku', 120],
    ['name', 300],
  ] as const)('data.items[0].%s: %i characters pass, one more fails', (field, max) => {
    expect(() => validateEvent(paid({ items: [{ [field]: 'x'.repeat(max) }] }), secret)).not.toThrow();
    expectError(
      paid({ items: [{ [field]: 'x'.repeat(max + 1) }] }),
      'invalid_request_body',
      `data.items[0].${field}`,
    );
  });

  it('identifiers must not be empty', () => {
    expectError(paid({ order_id: '' }), 'invalid_request_body', 'data.order_id');
    expectError(paid({ refund_id: '' }), 'invalid_request_body', 'data.refund_id');
    expectError(paid({ parent_order_id: '' }), 'invalid_request_body', 'data.parent_order_id');
  });

  it('currency is exactly 3 characters', () => {
    expect(() => validateEvent(paid({ currency: 'JPY', fx_rate: 9.1 }), secret)).not.toThrow();
    expectError(paid({ currency: 'KR' }), 'invalid_request_body', 'data.currency');
    expectError(paid({ currency: 'KRWW' }), 'invalid_request_body', 'data.currency');
    expectError(paid({ currency: 410 }), 'invalid_request_body', 'data.currency');
  });

  describe('amounts are integers from 0 to 2147483647', () => {
    const targets: [string, (v: unknown) => unknown][] = [
      ['data.amount', (v) => paid({ amount: v })],
      ['data.items[0].amount', (v) => paid({ items: [{ amount: v }] })],
      ['data.items[0].quantity', (v) => paid({ items: [{ quantity: v }] })],
    ];
    it.each(targets)('%s', (param, build) => {
      for (const ok of [0, 1, 2147483647]) expect(() => validateEvent(build(ok), secret)).not.toThrow();
      for (const bad of [1.5, '100', -1, 2147483648, 2 ** 53, true, [], {}]) {
        expectError(build(bad), 'invalid_request_body', param);
      }
    });

    it('round-trips the amount exactly', () => {
      expect(validateEvent(paid({ amount: 2147483647 }), secret).data.amount).toBe(2147483647);
    });
  });

  describe('fx_rate', () => {
    const rate = (fx_rate: unknown) => validateEvent(paid({ currency: 'USD', fx_rate }), secret).data.fxRate;

    it('accepts numbers and decimal strings, canonicalised without float math', () => {
      expect(rate(1350.25)).toBe('1350.25');
      expect(rate('1350.25')).toBe('1350.25');
      expect(rate('1350.2500')).toBe('1350.25');
      expect(rate('01350')).toBe('1350');
      expect(rate(100000)).toBe('100000');
      expect(rate('100000.00000000')).toBe('100000');
      expect(rate('0.00000001')).toBe('0.00000001');
      expect(rate(1e-8)).toBe('0.00000001');
      expect(rate('1234.12345678')).toBe('1234.12345678');
      expect(rate(0.1)).toBe('0.1');
    });

    it.each([
      ['zero', 0],
      ['zero string', '0.0'],
      ['negative', -5],
      ['negative string', '-1350'],
      ['above 100000', 100000.00000001],
      ['above 100000 string', '100001'],
      ['9 decimal places', '1.123456789'],
      ['9 decimal places number', 1.123456789],
      ['float noise', 0.1 + 0.2],
      ['exponent', '1e3'],
      ['comma', '1,350'],
      ['spaces', ' 1350'],
      ['empty', ''],
      ['leading dot', '.5'],
      ['text', 'abc'],
      ['NaN string', 'NaN'],
      ['Infinity string', 'Infinity'],
      ['NaN', Number.NaN],
      ['Infinity', Number.POSITIVE_INFINITY],
      ['too long', `1.${'0'.repeat(40)}`],
      ['boolean', true],
      ['object', { value: 1350 }],
    ])('rejects %s', (_, fx_rate) => {
      expectError(paid({ currency: 'USD', fx_rate }), 'invalid_request_body', 'data.fx_rate');
    });

    it('is validated even when not needed, and ignored for KRW', () => {
      expectError(paid({ fx_rate: -1 }), 'invalid_request_body', 'data.fx_rate');
      expect(validateEvent(paid({ fx_rate: 1 }), secret).data.fxRate).toBeNull();
    });
  });
});

describe('5b. customer_hash that is not a hex hash → personal_data_not_allowed', () => {
  const pii: unknown[] = [
    'kim.minji@example.com',
    '+82 10-1234-5678',
    '010-1234-5678',
    '821012345678',
    'Kim Minji',
    'Seoul Gangnam-gu Teheran-ro 123',
    'g'.repeat(64),
    'a'.repeat(31),
    'a'.repeat(65),
    ` ${hash64}`,
    '',
    821012345678,
    { email: 'kim.minji@example.com' },
  ];
  it.each(pii)('rejects %j without echoing it', (customer_hash) => {
    const err = expectError(paid({ customer_hash }), 'personal_data_not_allowed', 'data.customer_hash');
    expect(err.status).toBe(422);
    const json = serialised(err);
    const value = typeof customer_hash === 'string' ? customer_hash : JSON.stringify(customer_hash);
    if (value.trim().length > 0) expect(json).not.toContain(value.trim());
    if (typeof customer_hash === 'object') expect(json).not.toContain('kim.minji');
  });

  it('accepts 32 and 64 hex characters (either case) and null', () => {
    expect(validateEvent(paid({ customer_hash: 'A'.repeat(32) }), secret).data.customerHash).toBe(
      'a'.repeat(32),
    );
    expect(validateEvent(paid({ customer_hash: hash64 }), secret).data.customerHash).toBe(hash64);
    expect(validateEvent(paid({ customer_hash: null }), secret).data.customerHash).toBeNull();
  });

  it('carries the batch prefix', () => {
    expectError(
      paid({ customer_hash: 'a@b.co' }),
      'personal_data_not_allowed',
      'events[0].data.customer_hash',
      {
        ...secret,
        paramPrefix: 'events[0].',
      },
    );
  });
});

describe('6. occurred_at', () => {
  const at = (occurred_at: unknown) => validateEvent(paid({}, { occurred_at }), secret).occurredAt;

  it('accepts Z and numeric offsets and converts to UTC', () => {
    expect(at('2026-11-21T10:00:00Z')).toEqual(new Date('2026-11-21T10:00:00Z'));
    expect(at('2026-11-21T19:00:00+09:00')).toEqual(new Date('2026-11-21T10:00:00Z'));
    expect(at('2026-11-21T19:00:00+0900')).toEqual(new Date('2026-11-21T10:00:00Z'));
    expect(at('2026-11-21T05:00:00-05:00')).toEqual(new Date('2026-11-21T10:00:00Z'));
    expect(at('2026-11-21t10:00:00.123456z')).toEqual(new Date('2026-11-21T10:00:00.123Z'));
    expect(at('2026-11-21T10:00Z')).toEqual(new Date('2026-11-21T10:00:00Z'));
  });

  it('defaults to now when absent or null', () => {
    expect(at(undefined)).toEqual(now);
    expect(at(null)).toEqual(now);
  });

  it.each([
    ['a number', 1763769600000],
    ['an object', {}],
    ['text', 'yesterday'],
    ['a date only', '2026-11-21'],
    ['month 13', '2026-13-01T10:00:00Z'],
    ['31 September', '2026-09-31T10:00:00Z'],
    ['29 February in a common year', '2026-02-29T10:00:00Z'],
    ['hour 24', '2026-11-21T24:00:00Z'],
    ['offset +24:00', '2026-11-21T10:00:00+24:00'],
    ['a space separator', '2026-11-21 10:00:00Z'],
  ])('%s → invalid_request_body', (_, value) => {
    expectError(paid({}, { occurred_at: value }), 'invalid_request_body', 'occurred_at');
  });

  it('a date-time without offset → invalid_datetime', () => {
    expectError(paid({}, { occurred_at: '2026-11-01T10:00:00' }), 'invalid_datetime', 'occurred_at');
    expectError(paid({}, { occurred_at: '2026-11-01T10:00:00.5' }), 'invalid_datetime', 'occurred_at');
  });

  it('range edges: now-90d and now+5min are inside, one millisecond beyond is out', () => {
    const earliest = new Date(now.getTime() - OCCURRED_AT_MAX_PAST_MS);
    const latest = new Date(now.getTime() + OCCURRED_AT_MAX_FUTURE_MS);
    expect(earliest.toISOString()).toBe('2026-08-24T00:00:00.000Z');
    expect(latest.toISOString()).toBe('2026-11-22T00:05:00.000Z');
    expect(at(earliest.toISOString())).toEqual(earliest);
    expect(at(latest.toISOString())).toEqual(latest);
    expect(at('2026-11-22T09:05:00+09:00')).toEqual(latest);
    for (const outside of [
      '2026-08-23T23:59:59.999Z',
      '2026-11-22T00:05:00.001Z',
      '2026-11-22T09:05:01+09:00',
    ]) {
      const err = expectError(paid({}, { occurred_at: outside }), 'occurred_at_out_of_range', 'occurred_at');
      expect(err.details.hint).toBe(
        'Allowed range (UTC): 2026-08-24T00:00:00.000Z to 2026-11-22T00:05:00.000Z.',
      );
    }
  });
});

describe('7. unsupported currency → unsupported_currency', () => {
  it('names data.currency', () => {
    const err = expectError(paid({ currency: 'CNY', fx_rate: 190 }), 'unsupported_currency', 'data.currency');
    expect(err.details.hint).toContain('KRW, JPY, USD, EUR, GBP');
  });

  it('compares case-insensitively', () => {
    expect(validateEvent(paid({ currency: 'eUr', fx_rate: '1500' }), secret).data.currency).toBe('EUR');
    expect(validateEvent(paid({ currency: 'krw' }), secret).data.currency).toBe('KRW');
  });
});

describe('8. per-type required fields → missing_required_field', () => {
  const cases: [string, string[]][] = [
    ['order.paid', ['order_id', 'amount']],
    ['refund.created', ['order_id', 'refund_id', 'amount']],
    ['order.cancelled', ['order_id']],
    ['order.confirmed', ['order_id']],
    ['order.observed', ['order_id', 'amount']],
  ];
  const full = { order_id: 'o', refund_id: 'r', amount: 100 };
  it.each(cases)('%s needs %j', (type, fields) => {
    for (const field of fields) {
      const { [field as keyof typeof full]: _, ...rest } = full;
      expectError({ type, data: rest }, 'missing_required_field', `data.${field}`);
      expectError({ type, data: { ...full, [field]: null } }, 'missing_required_field', `data.${field}`);
    }
  });

  it('reports the first required field when data is absent', () => {
    expectError({ type: 'refund.created' }, 'missing_required_field', 'data.order_id');
  });

  it('order.cancelled ignores amount but still validates its form', () => {
    expect(
      validateEvent({ type: 'order.cancelled', data: { order_id: 'o' } }, secret).data.amount,
    ).toBeNull();
    expectError(
      { type: 'order.cancelled', data: { order_id: 'o', amount: 1.5 } },
      'invalid_request_body',
      'data.amount',
    );
  });
});

describe('9. non-KRW order.paid without fx_rate → missing_fx_rate', () => {
  it('names data.fx_rate', () => {
    expectError(paid({ currency: 'USD' }), 'missing_fx_rate', 'data.fx_rate');
    expectError(paid({ currency: 'jpy', fx_rate: null }), 'missing_fx_rate', 'data.fx_rate');
  });

  it('is not needed for refunds (the order rate is used) nor for KRW', () => {
    const refund = {
      type: 'refund.created',
      data: { order_id: 'o', refund_id: 'r', amount: 5, currency: 'USD' },
    };
    expect(validateEvent(refund, secret).data.fxRate).toBeNull();
    expect(validateEvent(paid(), secret).data.fxRate).toBeNull();
  });
});

describe('batch param prefix', () => {
  const opts = { ...secret, paramPrefix: 'events[3].' };
  it('prefixes field-level and event-level params', () => {
    expectError(paid({ amount: 1.5 }), 'invalid_request_body', 'events[3].data.amount', opts);
    expectError({ type: 'nope' }, 'unknown_event_type', 'events[3].type', opts);
    expectError({ data: {} }, 'missing_required_field', 'events[3].type', opts);
    expectError(paid({ order_id: null }), 'missing_required_field', 'events[3].data.order_id', opts);
    expectError(paid({ currency: 'USD' }), 'missing_fx_rate', 'events[3].data.fx_rate', opts);
    expectError(
      paid({}, { occurred_at: '2026-11-01T10:00:00' }),
      'invalid_datetime',
      'events[3].occurred_at',
      opts,
    );
    expectError(paid({ items: [{ sku: 1 }] }), 'invalid_request_body', 'events[3].data.items[0].sku', opts);
  });

  it('accepts the prefix without its trailing dot', () => {
    expectError(paid({ amount: -1 }), 'invalid_request_body', 'events[12].data.amount', {
      ...secret,
      paramPrefix: 'events[12]',
    });
  });

  it('puts the param in the message so a batch error names the event', () => {
    const err = expectError(paid({ amount: '100' }), 'invalid_request_body', 'events[3].data.amount', opts);
    expect(err.message).toContain('events[3].data.amount');
  });
});

describe('precedence between two simultaneous problems', () => {
  const cases: [string, unknown, ValidateEventOptions, ErrorCode, string | undefined][] = [
    ['unknown top-level field before missing type', { foo: 1 }, secret, 'invalid_request_body', 'foo'],
    ['missing type before bad data', { data: 'x' }, secret, 'missing_required_field', 'type'],
    [
      'unknown type before publishable-key check',
      { type: 'order.shipped' },
      publishable,
      'unknown_event_type',
      'type',
    ],
    [
      'publishable key before data schema',
      paid({ amount: 1.5, customer_hash: 'a@b.co' }),
      publishable,
      'event_type_not_allowed_for_publishable_key',
      'type',
    ],
    [
      'personal data before unknown data fields',
      paid({ foo: 1, customer_hash: 'a@b.co' }),
      secret,
      'personal_data_not_allowed',
      'data.customer_hash',
    ],
    [
      'unknown data field before a wrong type',
      paid({ amount: 1.5, foo: 1 }),
      secret,
      'invalid_request_body',
      'data.foo',
    ],
    [
      'unknown data field before an unknown item field',
      paid({ items: [{ colour: 'red' }], foo: 1 }),
      secret,
      'invalid_request_body',
      'data.foo',
    ],
    [
      'table order: amount before items',
      paid({ items: [{ sku: 1 }], amount: '1' }),
      secret,
      'invalid_request_body',
      'data.amount',
    ],
    [
      'data schema before occurred_at',
      paid({ amount: -1 }, { occurred_at: '2026-11-01T10:00:00' }),
      secret,
      'invalid_request_body',
      'data.amount',
    ],
    [
      'occurred_at before unsupported currency',
      paid({ currency: 'CNY' }, { occurred_at: '2020-01-01T00:00:00Z' }),
      secret,
      'occurred_at_out_of_range',
      'occurred_at',
    ],
    [
      'unsupported currency before required fields',
      { type: 'order.paid', data: { currency: 'CNY' } },
      secret,
      'unsupported_currency',
      'data.currency',
    ],
    [
      'required fields before fx_rate',
      { type: 'order.paid', data: { currency: 'USD', order_id: 'o' } },
      secret,
      'missing_required_field',
      'data.amount',
    ],
  ];
  it.each(cases)('%s', (_, input, opts, code, param) => {
    expectError(input, code, param, opts);
  });
});

describe('messages', () => {
  it('say what is wrong and what to do', () => {
    expect(errorOf(() => validateEvent(paid({ amount: 1.5 }), secret)).message).toMatch(
      /integer.*minor units/,
    );
    expect(errorOf(() => validateEvent(paid({ foo: 1 }), secret)).message).toMatch(
      /Unknown field 'data.foo'.*Remove/,
    );
    expect(errorOf(() => validateEvent(paid({ currency: 'USD' }), secret)).message).toMatch(/KRW per 1 USD/);
    expect(errorOf(() => validateEvent({ type: 'order.paid' }, publishable)).message).toMatch(
      /secret \(sk_\) key/,
    );
  });
});

describe('validateBatchEnvelope', () => {
  it('returns the events of 1 to 500', () => {
    expect(validateBatchEnvelope({ events: [paid()] })).toHaveLength(1);
    expect(validateBatchEnvelope({ events: Array.from({ length: 500 }, () => paid()) })).toHaveLength(500);
  });

  it.each([
    [[], 'invalid_request_body', undefined],
    [{ events: [], x: 1 }, 'invalid_request_body', 'x'],
    [{}, 'missing_required_field', 'events'],
    [{ events: {} }, 'invalid_request_body', 'events'],
    [{ events: [] }, 'invalid_request_body', 'events'],
    [{ events: Array.from({ length: 501 }, () => ({})) }, 'invalid_request_body', 'events'],
  ])('rejects %#', (input, code, param) => {
    const err = errorOf(() => validateBatchEnvelope(input));
    expect({ code: err.code, param: err.details.param }).toEqual({ code, param });
  });
});

describe('property: any valid order.paid passes', () => {
  const text = (max: number, min = 0) =>
    fc.string({ minLength: min, maxLength: max, unit: 'grapheme-ascii' });
  const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
  const int32 = fc.integer({ min: 0, max: 2147483647 });
  const fxRate = fc.oneof(
    fc.integer({ min: 1, max: 10_000_000_000_000 }).map((n) => (n / 1e8).toFixed(8)),
    fc.integer({ min: 1, max: 100000 }),
  );
  const order = fc.record(
    {
      order_id: text(120, 1),
      amount: int32,
      currency: fc.constantFrom(...Object.keys(supportedCurrencies)),
      fx_rate: fxRate,
      click_ref: optional(text(64)),
      coupon_code: optional(text(40)),
      parent_order_id: optional(text(120, 1)),
      reason: optional(fc.constant(null)),
      last_touch_channel: optional(text(32)),
      customer_hash: optional(fc.stringMatching(/^[0-9a-fA-F]{32,64}$/)),
      items: optional(
        fc.array(
          fc.record(
            { sku: text(120), name: text(300), quantity: int32, amount: int32 },
            { requiredKeys: [] },
          ),
          {
            maxLength: 5,
          },
        ),
      ),
    },
    { requiredKeys: ['order_id', 'amount', 'currency', 'fx_rate'] },
  );
  const occurredAt = fc
    .integer({ min: now.getTime() - OCCURRED_AT_MAX_PAST_MS, max: now.getTime() + OCCURRED_AT_MAX_FUTURE_MS })
    .map((ms) => new Date(ms).toISOString());

  it('round-trips amount, order_id and occurred_at exactly (through JSON)', () => {
    fc.assert(
      fc.property(order, optional(occurredAt), (data, occurred_at) => {
        const body = JSON.parse(JSON.stringify({ type: 'order.paid', data, occurred_at }));
        const event = validateEvent(body, secret);
        expect(event.type).toBe('order.paid');
        expect(event.data.amount).toBe(data.amount);
        expect(event.data.orderId).toBe(data.order_id);
        expect(event.data.currency).toBe(data.currency);
        expect(event.occurredAt.toISOString()).toBe(occurred_at ?? now.toISOString());
        if (data.currency !== 'KRW') expect(Number(event.data.fxRate)).toBe(Number(data.fx_rate));
      }),
      { numRuns: 300 },
    );
  });
});
