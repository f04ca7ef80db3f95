// `node dist/scripts/bench/batch-pipeline-run.js N`: N batches of 500 through the batch path's
// JavaScript (bench/batch-pipeline.ts), for valgrind to count (bench/instructions.ts).
import { batchPipeline } from './batch-pipeline.js';

const batches = Number(process.argv[2]);
if (!Number.isInteger(batches) || batches < 1) throw new Error('usage: batch-pipeline-run.js <batches>');
const run = await batchPipeline(batches, 500);
process.stdout.write(`${JSON.stringify(run)}\n`);
