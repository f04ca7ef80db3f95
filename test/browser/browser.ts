import { existsSync } from 'node:fs';
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
