import { randomUUID } from 'node:crypto';
import { LfError } from './errors.js';
import type { Transport } from './http.js';
import { byCursor, type PagedList } from './paged-list.js';
import type {
  Reconciliation,
  ReconciliationDifference,
  ReconciliationDifferenceList,
  ReconciliationDifferencesParams,
  ReconciliationList,
  ReconciliationResendPage,
  ReconciliationRow,
} from './types.js';

/** The brand's books for `[from, to)`: JSON rows (at most 10,000), or a CSV with a header row. */
export type ReconcileInput = {
  from: string;
  to: string;
  idempotencyKey?: string;
  /**
   * Time per attempt for the upload's answer, which comes once the books are read whole (and
   * compared, for a small upload): a million-row CSV takes tens of seconds. Default 15 minutes,
   * whatever the client's `timeoutMs`.
   */
  timeoutMs?: number;
} & (
  | { orders: ReconciliationRow[] }
  | {
      /** CSV text or bytes, or a stream of them (a file: `Readable.toWeb(createReadStream(path))`). */
      csv: string | Uint8Array | ReadableStream<Uint8Array>;
    }
);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** How long an upload's answer is waited for by default. */
export const UPLOAD_TIMEOUT_MS = 15 * 60_000;

export class ReconciliationsResource {
  constructor(private readonly transport: Transport) {}

  /**
   * `POST /v1/reconciliations`: uploads the books and answers the reconciliation, `processing`
   * or already `completed`. JSON rows or a CSV (streamed as it is read; a stream is sent once,
   * never retried). One Idempotency-Key per call (given or random), reused on its retries.
   */
  create(input: ReconcileInput): Promise<Reconciliation> {
    const idempotencyKey = input.idempotencyKey ?? randomUUID();
    if ('orders' in input)
      return this.transport.request<Reconciliation>({
        method: 'POST',
        path: '/v1/reconciliations',
        body: { from: input.from, to: input.to, orders: input.orders },
        idempotencyKey,
        timeoutMs: input.timeoutMs ?? UPLOAD_TIMEOUT_MS,
      });
    return this.transport.request<Reconciliation>({
      method: 'POST',
      path: '/v1/reconciliations',
      query: { from: input.from, to: input.to },
      rawBody: { contentType: 'text/csv', data: input.csv },
      idempotencyKey,
      timeoutMs: input.timeoutMs ?? UPLOAD_TIMEOUT_MS,
    });
  }

  /**
   * Uploads the books (`create`) and waits until the comparison is done: the reconciliation
   * `completed` (its differences and resend ready) or `failed`. Checks every `pollMs` (1 s) for at
   * most `timeoutMs` (10 minutes), then throws with the id to look at later.
   */
  async reconcile(
    input: ReconcileInput,
    options: { pollMs?: number; timeoutMs?: number } = {},
  ): Promise<Reconciliation> {
    const pollMs = options.pollMs ?? 1000;
    const deadline = Date.now() + (options.timeoutMs ?? 600_000);
    let reconciliation = await this.create(input);
    while (reconciliation.status === 'processing') {
      if (Date.now() >= deadline)
        throw new LfError(
          `Reconciliation ${reconciliation.id} is still processing: read it later with reconciliations.retrieve('${reconciliation.id}').`,
        );
      await sleep(pollMs);
      reconciliation = await this.retrieve(reconciliation.id);
    }
    return reconciliation;
  }

  /** `GET /v1/reconciliations/{reconciliation_id}`; another brand's or mode's: LfNotFoundError. */
  retrieve(reconciliationId: string): Promise<Reconciliation> {
    return this.transport.request<Reconciliation>({
      method: 'GET',
      path: `/v1/reconciliations/${encodeURIComponent(reconciliationId)}`,
    });
  }

  /** The brand's reconciliations of this key's mode, newest first. */
  list(params: { limit?: number } = {}): PagedList<Reconciliation> {
    return byCursor((cursor) =>
      this.transport.request<ReconciliationList>({
        method: 'GET',
        path: '/v1/reconciliations',
        query: { ...params, cursor },
      }),
    );
  }

  /** Every difference found (filter by `kind`, `fixable`), page by page. */
  differences(
    reconciliationId: string,
    params: Omit<ReconciliationDifferencesParams, 'cursor' | 'fixable'> & { fixable?: boolean } = {},
  ): PagedList<ReconciliationDifference> {
    return byCursor((cursor) =>
      this.transport.request<ReconciliationDifferenceList>({
        method: 'GET',
        path: `/v1/reconciliations/${encodeURIComponent(reconciliationId)}/differences`,
        query: { ...params, cursor },
      }),
    );
  }

  /**
   * One page of the resend (`cursor` from the page before): its `data`, sent with
   * `events.sendBatch`, applies those fixes; sending a page again changes nothing.
   */
  resendPage(reconciliationId: string, cursor?: string | null): Promise<ReconciliationResendPage> {
    return this.transport.request<ReconciliationResendPage>({
      method: 'GET',
      path: `/v1/reconciliations/${encodeURIComponent(reconciliationId)}/resend`,
      query: { cursor },
    });
  }

  /** Every page of the resend, in applying order. */
  async *resendPages(reconciliationId: string): AsyncGenerator<ReconciliationResendPage> {
    let cursor: string | null | undefined;
    do {
      const page = await this.resendPage(reconciliationId, cursor);
      yield page;
      cursor = page.has_more ? page.next_cursor : undefined;
    } while (cursor);
  }
}
