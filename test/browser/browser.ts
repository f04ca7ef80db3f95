import { existsSync } from 'node:fs';
import type { RequestListener, Server } from 'node:http';
import { createServer } from 'node:http';
import { type Browser, chromium } from 'playwright-core';

/**
 * Debian's chromium driven by playwright-core (never `npx playwright install`). Without it a
 * browser test file is skipped locally, with a warning naming it, and fails in CI (.ci/run
 * installs chromium and sets CI).
 */
export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const haveChromium = existsSync(chromiumPath);

/** Whether `file` skips: no chromium and not in CI. Warns once when it does. */
export function skipWithoutChromium(file: string): boolean {
  const skip = !haveChromium && !process.env.CI;
  if (skip) {
    console.warn(
      `${file} SKIPPED: no chromium at ${chromiumPath}. Install it (apt-get install -y chromium) or set CHROMIUM_PATH; in CI this file fails instead.`,
    );
  }
  return skip;
}

/** For beforeAll: the clear failure in CI when chromium is missing. */
export function requireChromium(): void {
  if (!haveChromium)
    throw new Error(`CI is set but there is no chromium at ${chromiumPath}: .ci/run installs it`);
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: chromiumPath,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

/** Listens on a free port of 127.0.0.1; `origin` is `http://127.0.0.1:<port>`. */
export async function listenLocally(handler: RequestListener): Promise<{ server: Server; origin: string }> {
  const server = createServer(handler).listen(0, '127.0.0.1');
  await new Promise<void>((done) => server.once('listening', done));
  return { server, origin: `http://127.0.0.1:${(server.address() as { port: number }).port}` };
}

export function closeServer(server: Server | undefined): Promise<void> {
  if (!server) return Promise.resolve();
  server.closeAllConnections();
  return new Promise((done) => server.close(() => done()));
}
