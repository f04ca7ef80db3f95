import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guide } from '../../src/openapi/guide.js';
import { root } from '../unit/source-files.js';

/**
 * The TypeScript a brand's engineer copies from the docs compiles against the SDK as it is: the
 * quickstart of /docs (the document's guide) and the README's "Tracking a sale end to end".
 * Written under tmp/ in the repository, so `express` and its types resolve as in a shop.
 */
let dir: string;
beforeAll(async () => {
  await mkdir(join(root, 'tmp'), { recursive: true });
  dir = await mkdtemp(join(root, 'tmp', 'doc-snippets-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const sdk = JSON.stringify(join(root, 'sdk/src/index.js'));

/** The ```ts blocks of a Markdown text, dedented (list items indent theirs). */
function tsBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^( *)```ts\n([\s\S]*?)^\1```/gm)].map(([, indent, body]) =>
    body!
      .split('\n')
      .map((line) => line.slice(indent!.length))
      .join('\n'),
  );
}

async function typeErrors(name: string, source: string): Promise<string[]> {
  const file = join(dir, `${name}.mts`);
  await writeFile(file, source.replaceAll("'@lf/sdk'", sdk));
  const program = ts.createProgram([file], {
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts'],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: ['node'],
    strict: true,
    skipLibCheck: true,
    noEmit: true,
  });
  return ts
    .getPreEmitDiagnostics(program)
    .map((d) => `${d.file?.fileName ?? ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
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
