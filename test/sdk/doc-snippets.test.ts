import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LfClient } from '../../sdk/src/index.js';
import { runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { guide } from '../../src/openapi/guide.js';
import { makeShop } from '../factories/index.js';
import { root } from '../unit/source-files.js';
import { type Service, startService } from './support.js';

/**
 * The TypeScript a brand's engineer copies from the docs compiles against the SDK as it is: the
 * quickstart of /docs (the document's guide), the README's "Tracking a sale end to end" and every
 * snippet of sdk/README.md, which also run, in order, against the real service.
 * Written under tmp/ in the repository, so `express` and its types resolve as in a shop.
 */
let dir: string;
beforeAll(async () => {
  await mkdir(join(root, 'tmp'), { recursive: true });
  dir = await mkdtemp(join(root, 'tmp', 'doc-snippets-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const sdk = JSON.stringify(join(root, 'sdk/src/index.js'));

interface Block {
  source: string;
  /** False when its info string says `no-run` (it starts a server or calls a made-up host). */
  runs: boolean;
}

/** The ```ts blocks of a Markdown text, dedented (list items indent theirs). */
function blocksOf(markdown: string): Block[] {
  return [...markdown.matchAll(/^( *)```ts([^\n]*)\n([\s\S]*?)^\1```/gm)].map(([, indent, info, body]) => ({
    source: body!
      .split('\n')
      .map((line) => line.slice(indent!.length))
      .join('\n'),
    runs: !info!.split(/\s+/).includes('no-run'),
  }));
}

const tsBlocks = (markdown: string) => blocksOf(markdown).map((b) => b.source);

/** Type errors of each source, compiled together as modules of one program. */
async function typeErrorsOf(sources: Record<string, string>): Promise<Record<string, string[]>> {
  const files = Object.fromEntries(Object.keys(sources).map((name) => [name, join(dir, `${name}.mts`)]));
  for (const [name, source] of Object.entries(sources))
    await writeFile(files[name]!, source.replaceAll("'@lf/sdk'", sdk));
  const program = ts.createProgram(Object.values(files), {
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts'],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: ['node'],
    strict: true,
    skipLibCheck: true,
    noEmit: true,
  });
  const errors: Record<string, string[]> = Object.fromEntries(Object.keys(sources).map((name) => [name, []]));
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const name = Object.keys(files).find((n) => files[n] === d.file?.fileName) ?? '(elsewhere)';
    errors[name] = [...(errors[name] ?? []), ts.flattenDiagnosticMessageText(d.messageText, '\n')];
  }
  return errors;
}

async function typeErrors(name: string, source: string): Promise<string[]> {
  const errors = await typeErrorsOf({ [name]: source });
  return Object.values(errors).flat();
}

describe('TypeScript in the docs', () => {
  it("the guide's quickstart (shown first in /docs) compiles against the SDK", async () => {
    const blocks = tsBlocks(guide('http://127.0.0.1:3000'));
    expect(blocks).toHaveLength(1);
    expect(blocks[0]).toContain("from '@lf/sdk'");
    expect(await typeErrors('guide', blocks[0]!)).toEqual([]);
  }, 60_000);

  it("the README's end-to-end walk compiles against the SDK and express, read top to bottom", async () => {
    const readme = await readFile(join(root, 'README.md'), 'utf8');
    const section = readme.split('## Tracking a sale end to end')[1]?.split('\n## ')[0] ?? '';
    const blocks = tsBlocks(section);
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    // What the walk leaves to the shop: its own payment code.
    const shop =
      'declare function chargeTheBuyer(req: unknown): Promise<{ id: string; eligibleAmount: number }>;\n';
    expect(await typeErrors('readme', shop + blocks.join('\n'))).toEqual([]);
  }, 60_000);

  it('would catch a snippet that no longer fits the SDK', async () => {
    const errors = await typeErrors(
      'broken',
      "import { LfClient } from '@lf/sdk';\nawait new LfClient({ apiKey: 'k' }).events.send({ type: 'order.payed', data: {} });\n",
    );
    expect(errors.join('\n')).toContain('order.payed');
  }, 60_000);
});

/**
 * What sdk/README.md's snippets assume besides the SDK: `lf`, the client its first snippet makes
 * (here one of the test's brand, against the test's service), and the shop's own code.
 */
function readmePrelude(block: string): string {
  const lf = /\bconst lf\b/.test(block)
    ? ''
    : `import type { LfClient as ReadmeClient } from '@lf/sdk';
const lf = (globalThis as unknown as { lfOfTheReadme: ReadmeClient }).lfOfTheReadme;
`;
  return `${lf}const chargeTheBuyer = async (_req: unknown) => ({ id: 'A-2001', eligibleAmount: 39_000 });
const yourSecretStore = { put: async (_name: string, _value: string) => {} };
`;
}

describe('sdk/README.md', () => {
  let service: Service | undefined;
  afterAll(async () => {
    delete (globalThis as { lfOfTheReadme?: LfClient }).lfOfTheReadme;
    await service?.close();
  });

  it('every snippet compiles, and all but the no-run ones run in order against the service', async () => {
    const blocks = blocksOf(await readFile(join(root, 'sdk/README.md'), 'utf8'));
    expect(blocks.filter((b) => !b.runs)).toHaveLength(2);
    const sources = Object.fromEntries(
      blocks.map((b, i) => [`sdk-readme-${i}`, readmePrelude(b.source) + b.source]),
    );
    const errors = await typeErrorsOf(sources);
    expect(errors).toEqual(Object.fromEntries(Object.keys(sources).map((name) => [name, []])));

    // A live brand (payouts are live only) with the fixture's creators and codes, and one payout
    // of run 2026-12 for the payouts snippet to read.
    service = await startService();
    const shop = await makeShop(service.ctx);
    const lf = new LfClient({ apiKey: shop.keys.sk_live, baseUrl: service.baseUrl });
    (globalThis as { lfOfTheReadme?: LfClient }).lfOfTheReadme = lf;
    await lf.events.send({
      type: 'order.paid',
      data: { order_id: 'SEED-1', amount: 50_000, coupon_code: 'MINA20' },
    });
    await service.ctx.orm.em
      .fork()
      .execute(`update orders set status = 'confirmed' where order_id = 'SEED-1'`);
    await runPayouts(service.ctx.orm, '2026-12', 'req_sdk_readme');

    const said: { level: string; args: unknown[] }[] = [];
    const spies = (['log', 'warn', 'error'] as const).map((level) =>
      vi.spyOn(console, level).mockImplementation((...args: unknown[]) => void said.push({ level, args })),
    );
    try {
      for (const [i, block] of blocks.entries()) {
        if (!block.runs) continue;
        try {
          await import(join(dir, `sdk-readme-${i}.mts`));
        } catch (err) {
          throw new Error(`sdk/README.md snippet ${i} failed: ${(err as Error).message}\n${block.source}`, {
            cause: err,
          });
        }
      }
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
    const text = said.map((s) =>
      s.args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' '),
    );
    // Paged lists: the creators as JSON, not `{}`.
    expect(text.join('\n')).toContain('"name": "Mina"');
    // Payouts: the seeded payout, its lines summing to its net amount.
    expect(said).toContainEqual({
      level: 'log',
      args: [shop.fixture.mina.creatorId, 1, 10_000, true],
    });
    // Batches: the refund over the amount stopped the batch at events[1].
    expect(text.find((t) => t.startsWith('events[1]: '))).toBeDefined();
    // Errors: refund_exceeds_remaining_amount caught, with its hint.
    expect(said.some((s) => s.level === 'warn' && String(s.args[0]).startsWith('refundable: '))).toBe(true);
    // Reconciliation: the order the books had and we did not, sent by the resend.
    expect(await lf.orders.get('BOOKS-7')).toMatchObject({ amount: 12_000 });
    // The writes happened: the paid order and its refund, and the webhook endpoint made, rolled and retired.
    expect(await lf.orders.get('A-1001')).toMatchObject({ refunded_amount: 13_000, attributed_via: 'code' });
    expect(await lf.webhookEndpoints.list()).toEqual([]);
  }, 120_000);
});
