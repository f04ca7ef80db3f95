import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { clientAddressOf } from '../../src/http/client-address.js';

const from = (socket: string, forwardedFor?: string) =>
  ({
    socket: { remoteAddress: socket },
    connection: { remoteAddress: socket },
    headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
  }) as unknown as IncomingMessage;

describe('the client address of per-address limits', () => {
  it('is the socket when no proxy is trusted, whatever X-Forwarded-For says', () => {
    const direct = clientAddressOf(0);
    expect(direct(from('203.0.113.9', '198.51.100.1'))).toBe('203.0.113.9');
  });

  it('is the entry the trusted hops wrote, never one a client wrote before them', () => {
    const behindRouter = clientAddressOf(1);
    expect(behindRouter(from('10.0.0.5', '203.0.113.9'))).toBe('203.0.113.9');
    expect(behindRouter(from('10.0.0.5', 'made-up, 198.51.100.1, 203.0.113.9'))).toBe('203.0.113.9');
    expect(clientAddressOf(2)(from('10.0.0.5', 'made-up, 203.0.113.9, 10.0.0.4'))).toBe('203.0.113.9');
  });

  it('counts an IPv6 client by its /64 and an IPv4-mapped address as IPv4', () => {
    const direct = clientAddressOf(0);
    expect(direct(from('2001:db8:1:2:aaaa::1'))).toBe('2001:db8:1:2::/64');
    expect(direct(from('2001:db8:1:2:bbbb:cccc:dddd:eeee'))).toBe('2001:db8:1:2::/64');
    expect(direct(from('2001:db8:1:3::1'))).toBe('2001:db8:1:3::/64');
    expect(direct(from('::ffff:203.0.113.9'))).toBe('203.0.113.9');
  });
});
