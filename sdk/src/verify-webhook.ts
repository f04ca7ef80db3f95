import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Verifies a webhook from this service, for receivers (README "Webhooks"): `body` is the raw
 * request body exactly as received (never re-serialized JSON), `header` the `LF-Signature`
 * header, `secret` the endpoint's `whsec_…`. True when some `v1` is the HMAC-SHA256 of
 * `<t>.<body>` under the secret (compared in constant time) and `t` lies within
 * `toleranceSeconds` of now (old or replayed deliveries fail). Self-contained: copy it as is.
 */
export function verifyWebhook(
  body: string | Uint8Array,
  header: string | null | undefined,
  secret: string,
  options: { toleranceSeconds?: number; now?: number } = {},
): boolean {
  if (typeof header !== 'string' || !secret) return false;
  const tolerance = options.toleranceSeconds ?? 300;
  let timestamp: number | undefined;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const [key, value] = part.trim().split('=', 2);
    if (key === 't' && value && /^\d{1,12}$/.test(value)) timestamp = Number(value);
    else if (key === 'v1' && value && /^[0-9a-f]{64}$/.test(value)) signatures.push(value);
  }
  if (timestamp === undefined || signatures.length === 0) return false;
  const now = Math.floor((options.now ?? Date.now()) / 1000);
  if (Math.abs(now - timestamp) > tolerance) return false;
  const payload = Buffer.concat([
    Buffer.from(`${timestamp}.`, 'utf8'),
    typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body),
  ]);
  const expected = createHmac('sha256', secret).update(payload).digest();
  // Every candidate is compared, so the time taken does not tell which one matched.
  let matched = false;
  for (const signature of signatures) {
    if (timingSafeEqual(expected, Buffer.from(signature, 'hex'))) matched = true;
  }
  return matched;
}
