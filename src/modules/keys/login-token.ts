import type { RequestHandler } from 'express';
import { createRemoteJWKSet, errors, type JWTVerifyGetKey, jwtVerify } from 'jose';
import type { Config } from '../../config.js';
import { AppError } from '../../shared/errors.js';

type Settings = Pick<Config, 'AUTH_JWT_SECRET' | 'AUTH_JWKS_URL' | 'AUTH_JWT_ISSUER' | 'AUTH_JWT_AUDIENCE'>;

/** Asymmetric algorithms accepted from a JWKS; HS256 only with the shared secret. `none` never. */
const JWKS_ALGORITHMS = ['RS256', 'ES256'];

const refused = (message: string) =>
  new AppError('invalid_login_token', message, {
    hint: "Send the brand's login JWT as `Authorization: Bearer <jwt>`; log in again if it expired.",
  });

function explain(err: unknown): AppError {
  if (err instanceof errors.JWTExpired) return refused('The login token has expired.');
  if (err instanceof errors.JWTClaimValidationFailed)
    return refused(`The login token's \`${err.claim}\` claim is not accepted here.`);
  if (err instanceof errors.JOSEAlgNotAllowed)
    return refused("The login token's signing algorithm is not accepted.");
  if (err instanceof errors.JWSSignatureVerificationFailed)
    return refused("The login token's signature is not valid.");
  if (err instanceof errors.JWKSNoMatchingKey)
    return refused('The login token was signed by an unknown key.');
  return refused('The login token could not be verified.');
}

/**
 * Verifies the brand's login JWT: the algorithm is pinned per key source (so `alg: none` and
 * HS256-with-a-public-key are refused), exp and nbf are checked with 30 s of clock skew, and
 * the issuer and audience must be the configured ones. Returns the token's brand.
 */
export function loginTokenVerifier(settings: Settings) {
  const secret = settings.AUTH_JWT_SECRET ? new TextEncoder().encode(settings.AUTH_JWT_SECRET) : null;
  const jwks = settings.AUTH_JWKS_URL ? createRemoteJWKSet(new URL(settings.AUTH_JWKS_URL)) : null;
  const algorithms = [...(secret ? ['HS256'] : []), ...(jwks ? JWKS_ALGORITHMS : [])];
  const key: JWTVerifyGetKey = async (header, token) => {
    if (header.alg === 'HS256' && secret) return secret;
    if (jwks) return jwks(header, token);
    throw new errors.JOSEAlgNotAllowed('algorithm not allowed');
  };
  return async (token: string): Promise<{ brandId: string }> => {
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(token, key, {
        algorithms,
        issuer: settings.AUTH_JWT_ISSUER,
        audience: settings.AUTH_JWT_AUDIENCE,
        clockTolerance: 30,
        requiredClaims: ['exp'],
      }));
    } catch (err) {
      throw explain(err);
    }
    if (typeof payload.brand_id !== 'string' || payload.brand_id.length === 0) {
      throw refused('The login token has no `brand_id` claim.');
    }
    return { brandId: payload.brand_id };
  };
}

/** Sets `req.loginBrandId` from `Authorization: Bearer <jwt>`; the token itself is never logged. */
export function authenticateLoginToken(verify: ReturnType<typeof loginTokenVerifier>): RequestHandler {
  return async (req, _res, next) => {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (!match)
      throw refused(
        req.headers.authorization ? 'The Authorization header is malformed.' : 'No login token was sent.',
      );
    req.loginBrandId = (await verify(match[1]!)).brandId;
    next();
  };
}
