// The parsing thread of a large CSV upload (started by upload.ts, one per upload): csv-parse, the
// row checks and the rows' encoding as COPY data, which are all of an upload's work but writing it,
// run here instead of on the event loop that serves requests, at a low CPU priority, so they take
// mostly what live traffic leaves; the event loop receives whole batches' bytes, no row objects.
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import type { CsvBatchReply } from './csv-rows.js';

/** A message to the thread: the upload's next bytes, or its end. */
export type CsvThreadInput = { chunk: Uint8Array } | { end: true };

/** What the thread is started with: whose rows it stages. */
export interface CsvThreadData {
  brandId: string;
  reconciliationId: string;
}

if (parentPort) {
  const port = parentPort;
  try {
    // Linux sets a thread's nice value (0 names the calling thread): only this thread yields. Not
    // the lowest: under full load an upload still gets a tenth of a core and finishes.
    setPriority(10);
  } catch {
    // Some platforms refuse it; the thread still keeps the parsing off the event loop.
  }
  // Loaded once the thread yields: compiling the parser and the row checks is most of its start.
  const { CsvBatches } = await import('./csv-rows.js');
  const { brandId, reconciliationId } = workerData as CsvThreadData;
  const batches = new CsvBatches(brandId, reconciliationId);
  port.on('message', (input: CsvThreadInput) => {
    const reply =
      'chunk' in input
        ? batches.parse(Buffer.from(input.chunk.buffer, input.chunk.byteOffset, input.chunk.byteLength))
        : batches.parse(undefined);
    // The batches' memory moves to the event loop's thread, not copied.
    port.postMessage(
      reply satisfies CsvBatchReply,
      reply.batches.map((b) => b.data.buffer as ArrayBuffer),
    );
  });
}
