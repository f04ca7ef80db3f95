// `node dist/scripts/bench/batch-pipeline-run.js N [variant]`: N batches of 500 through the batch
// path's JavaScript (bench/batch-pipeline.ts), for valgrind to count (bench/instructions.ts).
import { batchPipeline, type PipelineVariant, pipelineVariants } from './batch-pipeline.js';

const batches = Number(process.argv[2]);
const variant = (process.argv[3] ?? 'demo') as PipelineVariant;
if (!Number.isInteger(batches) || batches < 1 || !pipelineVariants.includes(variant))
  throw new Error(`usage: batch-pipeline-run.js <batches> [${pipelineVariants.join('|')}]`);
const run = await batchPipeline(batches, 500, variant);
process.stdout.write(`${JSON.stringify(run)}\n`);
