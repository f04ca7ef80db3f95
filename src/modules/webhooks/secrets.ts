import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { randomToken } from '../../shared/ids.js';

/**
 * Endpoint signing secrets must sign every delivery, so they cannot be hashed like API keys:
 * they are stored encrypted with AES-256-GCM under a key derived (HKDF-SHA256) from
 * SECRET_KEY_BASE, which the web and worker processes share. A database dump alone reveals
 * none. The plain secret leaves the service only in the response that created or rolled it.
 */
const VERSION = 'v1';
const keys = new Map<string, Buffer>();

function keyFor(secretKeyBase: string): Buffer {
  let key = keys.get(secretKeyBase);
  if (!key) {
    key = Buffer.from(
      hkdfSync('sha256', secretKeyBase, 'lf-webhooks', 'webhook endpoint signing secrets', 32),
    );
    keys.set(secretKeyBase, key);
  }
  return key;
}

/** `whsec_` and 32 base62 characters (190 bits). */
export function newSigningSecret(): string {
  return `whsec_${randomToken(32)}`;
}

/** `v1.<base64url of iv ‖ tag ‖ ciphertext>`. */
export function encryptSecret(plain: string, secretKeyBase: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyFor(secretKeyBase), iv);
  const ciphertext = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return `${VERSION}.${Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString('base64url')}`;
}

/** Throws when the value was not encrypted under this SECRET_KEY_BASE (the tag does not verify). */
export function decryptSecret(stored: string, secretKeyBase: string): string {
  const [version, payload] = stored.split('.');
  if (version !== VERSION || !payload) throw new Error('unknown webhook secret format');
  const raw = Buffer.from(payload, 'base64url');
  const decipher = createDecipheriv('aes-256-gcm', keyFor(secretKeyBase), raw.subarray(0, 12));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}
