import type { RequestHandler } from 'express';

type HeaderValue = string | number | readonly string[];

/**
 * `middleware`'s headers, set without running it: it must only set and remove headers, the same
 * whatever the request (helmet's, configured without nonces or functions). It is run once here on
 * a recording response; each request then gets the headers it set, names as it spelt them.
 * helmet's chain of fourteen small middlewares cost twice what setting its headers directly
 * does (docs/benchmarks.md, "Profile notes").
 */
export function fixedHeaders(middleware: RequestHandler): RequestHandler {
  const recorded = recordHeaders(middleware);
  return (_req, res, next) => {
    for (const [name, value] of recorded) res.setHeader(name, value);
    next();
  };
}

/** The headers `middleware` leaves set, in the order it first set them; it must pass the request on at once. */
function recordHeaders(middleware: RequestHandler): [string, HeaderValue][] {
  const headers = new Map<string, [string, HeaderValue]>();
  const response = {
    setHeader(name: string, value: HeaderValue) {
      headers.set(name.toLowerCase(), [name, value]);
      return response;
    },
    removeHeader(name: string) {
      headers.delete(name.toLowerCase());
    },
  };
  let passedOn = false;
  middleware({ headers: {} } as never, response as never, (err?: unknown) => {
    if (err) throw err;
    passedOn = true;
  });
  if (!passedOn) throw new Error('a header middleware must pass the request on at once');
  return [...headers.values()];
}
