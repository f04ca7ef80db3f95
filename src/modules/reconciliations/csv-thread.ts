// The parsing thread of a large CSV upload (started by upload.ts, one per upload): csv-parse and
// the row checks, which are most of an upload's CPU, run here instead of on the event loop that
// serves requests, at a low CPU priority, so they take mostly what live traffic leaves.
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { CsvChunks, type CsvReply } from './csv-rows.js';

/** A message to the thread: the upload's next bytes, or its end. */
export type CsvThreadInput = { chunk: Uint8Array } | { end: true };

if (parentPort) {
  const port = parentPort;
  try {
    // Linux sets a thread's nice value (0 names the calling thread): only this thread yields. Not
    // the lowest: under full load an upload still gets a tenth of a core and finishes.
    setPriority(10);
  } catch {
    // Some platforms refuse it; the thread still keeps the parsing off the event loop.
  }
  const chunks = new CsvChunks();
  port.on('message', (input: CsvThreadInput) => {
    const reply =
      'chunk' in input
        ? chunks.parse(Buffer.from(input.chunk.buffer, input.chunk.byteOffset, input.chunk.byteLength))
        : chunks.parse(undefined);
    port.postMessage(reply satisfies CsvReply);
  });
}
