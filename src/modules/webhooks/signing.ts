import { createHmac } from 'node:crypto';

export const SIGNATURE_HEADER = 'LF-Signature';

/** Hex HMAC-SHA256 of `<t>.<body>` under one secret. */
export function signaturePart(secret: string, timestamp: number, body: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
}

/**
 * `t=<unix seconds>,v1=<hex>`: one `v1` per secret that is valid now (two while a secret is
 * rolling, the new one first). A receiver accepts the body when any `v1` matches its secret.
 */
export function signatureHeader(secrets: readonly string[], timestamp: number, body: string): string {
  return [`t=${timestamp}`, ...secrets.map((s) => `v1=${signaturePart(s, timestamp, body)}`)].join(',');
}
