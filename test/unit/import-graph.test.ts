import { readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root, serviceFiles } from './source-files.js';

/** Every relative import and re-export of a file, type-only ones included: they circle too. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  return [...text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s+'(\.[^']+)'/g)].map((m) =>
    resolve(dirname(file), m[1]!.replace(/\.js$/, '.ts')),
  );
}

/** Strongly connected components with more than one file (Tarjan). */
function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    order.set(node, index);
    low.set(node, index++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!graph.has(next)) continue;
      if (!order.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, order.get(next)!));
    }
    if (low.get(node) === order.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(relative(root, member));
      } while (member !== node);
      if (component.length > 1) found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!order.has(node)) visit(node);
  return found;
}

const files = serviceFiles();
const graph = new Map(files.map((f) => [f, importsOf(f)]));
const rel = (f: string) => relative(root, f);

describe('the import graph', () => {
  it('has no circles', () => {
    expect(cycles(graph)).toEqual([]);
  });

  it('points one way: intake → ingestion → (attribution, ledger, orders), never back', () => {
    const moduleOf = (f: string) => /^src\/modules\/([^/]+)\//.exec(rel(f))?.[1];
    const forbidden: Record<string, string[]> = {
      ingestion: ['events'],
      orders: ['events', 'ingestion', 'ledger', 'attribution'],
      ledger: ['events', 'ingestion', 'orders'],
      attribution: ['events', 'ingestion', 'orders', 'ledger'],
    };
    const wrong: string[] = [];
    for (const [file, imports] of graph) {
      const from = moduleOf(file);
      for (const target of imports) {
        // An entity naming another module's entity is a foreign key in the schema, not a call.
        if (file.endsWith('.entity.ts') && target.endsWith('.entity.ts')) continue;
        const to = moduleOf(target);
        if (from && to && forbidden[from]?.includes(to)) wrong.push(`${rel(file)} → ${rel(target)}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('route files take their dependencies from src/deps.ts, not from app.ts', () => {
    const intoApp = [...graph].filter(([, imports]) => imports.includes(join(root, 'src/app.ts')));
    expect(intoApp.map(([f]) => rel(f))).toEqual(['src/server.ts']);
  });
});
