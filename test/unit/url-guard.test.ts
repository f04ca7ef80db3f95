import { describe, expect, it } from 'vitest';
import {
  checkWebhookUrl,
  isPublicAddress,
  logWebhookUrlPolicy,
  nonPublicRange,
  type Resolver,
} from '../../src/modules/webhooks/url-guard.js';
import { capturingLogger } from '../setup/capturing-logger.js';

/**
 * Teredo (RFC 4380): 2001:0::/32, the server's IPv4 in bits 32-63, the client's IPv4 XOR
 * 0xffffffff in the last 32 bits.
 */
function teredo(server: string, client: string): string {
  const hex = (ip: string, xor: number) => {
    const n = (ip.split('.').reduce((a, o) => a * 256 + Number(o), 0) ^ xor) >>> 0;
    return `${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  };
  return `2001:0:${hex(server, 0)}:8000:63bf:${hex(client, 0xffffffff)}`;
}

describe('which addresses a webhook may go to', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.0.1', 'private'],
    ['169.254.169.254', 'linkLocal'],
    ['100.100.100.200', 'carrierGradeNat'],
    ['0.0.0.0', 'unspecified'],
    ['255.255.255.255', 'broadcast'],
    ['224.0.0.1', 'multicast'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fe80::1', 'linkLocal'],
    ['fe80::1%eth0', 'linkLocal'],
    ['fc00::1', 'uniqueLocal'],
    ['fd00:ec2::254', 'uniqueLocal'],
    ['fec0::1', 'deprecatedSiteLocal'],
    ['ff02::1', 'multicast'],
    ['100::1', 'discard'],
    ['2001:db8::1', 'reserved'],
    ['2001:2::1', 'benchmarking'],
    ['4000::1', 'not global unicast'],
  ])('refuses %s (%s)', (address, range) => {
    expect(nonPublicRange(address)).toBe(range);
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each([
    ['::ffff:127.0.0.1', 'IPv4-mapped 127.0.0.1 (loopback)'],
    ['::ffff:7f00:1', 'IPv4-mapped 127.0.0.1 (loopback)'],
    ['::ffff:a9fe:a9fe', 'IPv4-mapped 169.254.169.254 (linkLocal)'],
    ['64:ff9b::a9fe:a9fe', 'NAT64 169.254.169.254 (linkLocal)'],
    ['64:ff9b::10.0.0.1', 'NAT64 10.0.0.1 (private)'],
    ['64:ff9b::7f00:1', 'NAT64 127.0.0.1 (loopback)'],
  ])('refuses %s by the IPv4 inside it: %s', (address, reason) => {
    expect(nonPublicRange(address)).toBe(reason);
  });

  it.each([
    ['2002:a9fe:a9fe::', '6to4'],
    ['2002:7f00:1::1', '6to4'],
    ['2002:808:808::1', '6to4'], // 8.8.8.8 inside: refused all the same
    [teredo('65.54.227.120', '127.0.0.1'), 'teredo'],
    [teredo('65.54.227.120', '10.0.0.5'), 'teredo'],
    [teredo('10.0.0.1', '8.8.8.8'), 'teredo'],
    [teredo('65.54.227.120', '8.8.8.8'), 'teredo'],
    ['64:ff9b:1::808:808', 'rfc6052'], // local-use NAT64
    ['::ffff:0:7f00:1', 'rfc6145'],
    // IPv4-compatible, written as getaddrinfo writes it (ipaddr.js alone would read it as mapped)
    ['::8.8.8.8', 'IPv4-compatible'],
    ['::127.0.0.1', 'IPv4-compatible'],
    ['::7f00:1', 'IPv4-compatible'],
  ])('refuses %s whatever it carries (%s)', (address, range) => {
    expect(nonPublicRange(address)).toBe(range);
  });

  it('builds Teredo addresses as RFC 4380 lays them out', () => {
    // Microsoft's documented example: server 65.54.227.120, client 192.0.2.45 (port 40000).
    expect(teredo('65.54.227.120', '192.0.2.45')).toBe('2001:0:4136:e378:8000:63bf:3fff:fdd2');
  });

  it.each([
    '8.8.8.8',
    '93.184.216.34',
    '2606:4700:4700::1111',
    '2001:4860:4860::8888',
    '2a00:1450:4001:80b::200e',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '64:ff9b::93.184.216.34',
  ])('allows the public address %s', (address) => {
    expect(nonPublicRange(address)).toBeNull();
    expect(isPublicAddress(address)).toBe(true);
  });

  it.each(['not-an-ip', '1.2.3', '0x7f.1', '2130706433', '::ffff:127.0.0.1.1', ''])(
    'refuses %j, which is not an address',
    (text) => {
      expect(nonPublicRange(text)).toBe('not an IP address');
    },
  );
});

describe('checkWebhookUrl under the default rules', () => {
  const policy = { allowPrivate: false };
  const resolvesTo =
    (...addresses: string[]): Resolver =>
    async () =>
      addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

  it('gives the checked address to connect to, and refuses a host with any non-public answer', async () => {
    expect(await checkWebhookUrl('https://hooks.example.com/x', policy, resolvesTo('93.184.216.34'))).toEqual(
      {
        address: '93.184.216.34',
        family: 4,
      },
    );
    await expect(
      checkWebhookUrl(
        'https://hooks.example.com/x',
        policy,
        resolvesTo('93.184.216.34', '64:ff9b::a9fe:a9fe'),
      ),
    ).rejects.toThrow(
      'The host hooks.example.com resolves to 64:ff9b::a9fe:a9fe, which is not public (NAT64 169.254.169.254 (linkLocal)); use a host on the public internet.',
    );
  });

  it.each([
    [
      'https://169.254.169.254/latest/meta-data/',
      /^The address 169\.254\.169\.254 is not public \(linkLocal\)/,
    ],
    ['https://[::ffff:127.0.0.1]/x', /^The address ::ffff:7f00:1 is not public \(IPv4-mapped 127\.0\.0\.1/],
    ['https://[2002:a9fe:a9fe::]/x', /is not public \(6to4\)/],
    ['https://0x7f.1/x', /^The address 127\.0\.0\.1 is not public \(loopback\)/],
    ['http://hooks.example.com/x', /^The URL must use https\.$/],
  ])('refuses %s without resolving it', async (url, message) => {
    const never: Resolver = async () => {
      throw new Error('resolved');
    };
    await expect(checkWebhookUrl(url, policy, never)).rejects.toThrow(message);
  });

  it('lifts the address and https rules only when private URLs are allowed', async () => {
    expect(await checkWebhookUrl('http://127.0.0.1:1/x', { allowPrivate: true })).toBeNull();
    await expect(checkWebhookUrl('http://u:p@127.0.0.1:1/x', { allowPrivate: true })).rejects.toThrow(
      /must not carry credentials/,
    );
  });
});

describe('the line at start', () => {
  const lines = (config: {
    NODE_ENV: 'development' | 'test' | 'production';
    WEBHOOK_ALLOW_PRIVATE_URLS: boolean;
  }) => {
    const { logger, lines } = capturingLogger('info');
    logWebhookUrlPolicy(logger, config);
    return lines.map((line) => JSON.parse(line) as { level: string; msg: string });
  };

  it('says nothing under the default rules', () => {
    expect(lines({ NODE_ENV: 'production', WEBHOOK_ALLOW_PRIVATE_URLS: false })).toEqual([]);
    expect(lines({ NODE_ENV: 'development', WEBHOOK_ALLOW_PRIVATE_URLS: false })).toEqual([]);
  });

  it('says the rules are lifted: a warning in production, information elsewhere', () => {
    const [production] = lines({ NODE_ENV: 'production', WEBHOOK_ALLOW_PRIVATE_URLS: true });
    expect(production).toMatchObject({
      level: 'warn',
      msg: expect.stringMatching(/^WEBHOOK_ALLOW_PRIVATE_URLS=true: /),
    });
    expect(production!.msg).toContain('unset it unless');
    const [development] = lines({ NODE_ENV: 'development', WEBHOOK_ALLOW_PRIVATE_URLS: true });
    expect(development).toMatchObject({
      level: 'info',
      msg: expect.stringMatching(/^WEBHOOK_ALLOW_PRIVATE_URLS=true: /),
    });
  });
});
