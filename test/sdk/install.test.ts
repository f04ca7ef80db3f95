import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { root } from '../unit/source-files.js';

/**
 * The README's way into a shop, command for command: `npm run build -w sdk && npm pack ./sdk`,
 * then `npm install <tarball>` in another project, which imports `@lf/sdk` by name.
 */
const work = mkdtempSync(join(tmpdir(), 'lf-sdk-install-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function npm(args: string[], cwd: string) {
  const run = spawnSync('npm', [...args, '--no-audit', '--no-fund'], { cwd, encoding: 'utf8' });
  expect(run.status, `npm ${args.join(' ')}\n${run.stdout}\n${run.stderr}`).toBe(0);
  return run;
}

describe('installing the SDK as the README says', () => {
  it('builds, packs to lf-sdk-<version>.tgz, installs into a shop and imports by name', () => {
    npm(['run', 'build', '-w', 'sdk'], root);
    npm(['pack', './sdk', '--pack-destination', work], root);
    const [tarball] = readdirSync(work).filter((f) => /^lf-sdk-\d+\.\d+\.\d+\.tgz$/.test(f));
    expect(tarball).toBeDefined();

    const shop = join(work, 'shop');
    spawnSync('mkdir', [shop]);
    writeFileSync(
      join(shop, 'package.json'),
      JSON.stringify({ name: 'shop', private: true, type: 'module' }),
    );
    npm(['install', join(work, tarball!)], shop);
    const script = `import { LfClient, lfClick, verifyWebhook } from '@lf/sdk';
const lf = new LfClient({ apiKey: 'sk_test_x' });
console.log(typeof lf.events.send, typeof lfClick(), verifyWebhook('{}', 't=1,v1=00', 'whsec_x'));`;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: shop,
      encoding: 'utf8',
    });
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('function function false');
  }, 120_000);
});
