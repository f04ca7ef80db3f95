import { appendFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { Express } from 'express';
import request from 'supertest';
import { inject } from 'vitest';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Where the test workers leave the answers the service gave (test/setup/answers-check.ts). */
    answersDir?: string;
  }
}

/**
 * What the service under test answered during the run, read from its own log: the line it
 * writes for every finished request (src/http/request-log.ts) names the method, the path, the
 * status and, for an error, its code. The apps the test helpers build log through
 * capturingLogger, and the web processes tests start write to the stdout they watch
 * (child-output.ts); both hand their lines here. Each test file's answers go to one file per
 * worker when the file ends (per-file.ts); the global setup's teardown checks them all
 * (answers-check.ts).
 */

/** [method, path, status, error code or null], as JSON: distinct answers only. */
type Pending = Set<string>;

// On globalThis: per-file.ts evaluates test/ anew for every file, and its own import of this
// module is evaluated before that; every evaluation in the worker must share one record.
const PENDING = Symbol.for('lf.test.answers');
const DOCUMENT_KEPT = Symbol.for('lf.test.answers.document');
const shared = globalThis as { [PENDING]?: Pending; [DOCUMENT_KEPT]?: boolean };
const pending = (): Pending => {
  shared[PENDING] ??= new Set();
  return shared[PENDING];
};

const REQUEST_COMPLETED = '"msg":"request completed"';

/** Records the answer a log line of the service reports; any other line is ignored. */
export function recordLogLine(line: string): void {
  if (!line.includes(REQUEST_COMPLETED)) return;
  let entry: { req?: { method?: string; path?: string }; res?: { status?: number; error_code?: string } };
  try {
    entry = JSON.parse(line);
  } catch {
    return;
  }
  const { req, res } = entry;
  if (!req?.method || !req.path || typeof res?.status !== 'number') return;
  pending().add(JSON.stringify([req.method, req.path, res.status, res.error_code ?? null]));
}

/** Appends what `file`'s tests made the service answer to this worker's record, and starts afresh. */
export function flushAnswers(file: string): void {
  const answers = pending();
  const dir = inject('answersDir');
  if (dir && answers.size > 0) {
    const line = `{"file":${JSON.stringify(relative(process.cwd(), file))},"answers":[${[...answers].join(',')}]}\n`;
    appendFileSync(join(dir, `${process.pid}.jsonl`), line);
  }
  answers.clear();
}

/**
 * The first app built in the run leaves its OpenAPI document beside the answers, to check them
 * against: what `GET /openapi.json` serves, once per run.
 */
export async function keepOpenApiDocument(app: Express, host: string | undefined): Promise<void> {
  const dir = inject('answersDir');
  if (!dir || shared[DOCUMENT_KEPT]) return;
  shared[DOCUMENT_KEPT] = true;
  const claim = join(dir, 'openapi.claim');
  try {
    writeFileSync(claim, String(process.pid), { flag: 'wx' });
  } catch {
    return;
  }
  const res = await request(app)
    .get('/openapi.json')
    .set('Host', host ?? '127.0.0.1');
  if (res.status !== 200) {
    rmSync(claim);
    shared[DOCUMENT_KEPT] = false;
    return;
  }
  // Renamed into place: a reader never sees half of it.
  writeFileSync(`${claim}.tmp`, res.text);
  renameSync(`${claim}.tmp`, join(dir, 'openapi.json'));
}
