import { describe, expect, it } from 'vitest';
import { batchPipeline } from '../../scripts/bench/batch-pipeline.js';
import { compilingOf, instructionsOf, perEventInstructions } from '../../scripts/bench/instructions.js';

describe("the bench's batch path without HTTP or database", () => {
  it('validates, plans and encodes every event: attributed answers and the write of each order', async () => {
    const run = await batchPipeline(2, 50);
    expect(run.events).toBe(100);
    expect(run.attributed).toBe(100);
    // An order row, a movement and a received event per event at least, column by column.
    expect(run.writeBytes).toBeGreaterThan(100 * 500);
    expect(run.answerBytes).toBeGreaterThan(100 * 250);
  });
});

describe("the same path for --program-cost's events, without and with the program", () => {
  it('prices the lines under the program: the first batch reads its rows apart, the next with the load; a larger decision and write', async () => {
    const lines = await batchPipeline(2, 50, 'lines');
    const program = await batchPipeline(2, 50, 'program');
    expect(lines.programStatements).toBe(0);
    expect(program.programStatements).toBe(1);
    expect(program.attributed).toBe(100);
    // Each order's pinned version, its capped amount and its priced parts in the decision.
    expect(program.writeBytes - lines.writeBytes).toBeGreaterThan(100 * 100);
    expect(program.answerBytes).toBe(lines.answerBytes);
  });
});

describe('instructions per event (npm run bench -- --instructions)', () => {
  it("reads callgrind's total and takes the warm-up run's from the longer one", () => {
    const report = '==30402== Collected : 2377376154\n==30402== \n==30402== I   refs:      2,377,376,154\n';
    expect(instructionsOf(report)).toBe(2_377_376_154);
    expect(perEventInstructions([2_371_421_847, 4_023_881_419], 20)).toBeCloseTo(165_246, 0);
    expect(() => instructionsOf('valgrind: command not found')).toThrow(/no instruction count/);
  });

  it("reads the optimizing compilers' inclusive count from callgrind_annotate --inclusive=yes", () => {
    const annotated = [
      '1,171,843,379 (17.34%)  ???:v8::internal::(anonymous namespace)::CompileOptimized(v8::internal::DirectHandle<v8::internal::JSFunction>) [node]',
      '1,171,797,666 (17.34%)  ???:v8::internal::Compiler::CompileOptimized(v8::internal::Isolate*, v8::internal::DirectHandle<v8::internal::JSFunction>) [node]',
    ].join('\n');
    expect(compilingOf(annotated)).toBe(1_171_797_666);
    expect(compilingOf('')).toBe(0);
  });
});
