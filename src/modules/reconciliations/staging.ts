// An upload's rows as they are staged: binary COPY data for reconciliation_rows, a batch of rows
// at a time. A large CSV upload's batches are encoded in its parsing thread (csv-thread.ts), so
// the event loop that serves requests only hands bytes to PostgreSQL; a JSON upload's here.
import { copyRows, EPOCH_MS } from '../../db/fast-path/index.js';
import { AppError } from '../../shared/errors.js';
import type { BrandRow } from './brand-row.js';

export const stageCopy = copyRows('reconciliation_rows', {
  brand_id: 'text',
  reconciliation_id: 'text',
  line: 'int',
  order_id: 'text',
  status: 'text',
  amount: 'bigint',
  currency: 'text',
  fx_rate: 'numeric(18,8)',
  refunded_amount: 'bigint',
  occurred_at: EPOCH_MS,
  coupon_code: 'text',
  click_ref: 'text',
  customer_hash: 'text',
  parent_order_id: 'text',
});

/**
 * Rows per batch (one COPY): one batch written while the next is read, so at most two in memory
 * (about half a megabyte each); each COPY's start-up is a fixed cost that smaller batches pay more
 * often (docs/benchmarks.md). The upload's pace, not the batch, keeps its share of the database small.
 */
export const BATCH_ROWS = 4000;

/** A batch of staged rows: one COPY's data. */
export interface Batch {
  data: Uint8Array;
  rows: number;
}

/** `param` names the row (csv-rows.ts `RowParam`). */
export function duplicate(param: (line: number, field?: string) => string, line: number): AppError {
  return new AppError('duplicate_order_id', `${param(line)} repeats an order_id of an earlier row.`, {
    param: param(line, 'order_id'),
    hint: 'Send each order once, with its current values (cumulative refunds in refunded_amount).',
  });
}

/**
 * Encodes rows into batches as they are added: nothing of a row is kept but its order_id (for a
 * repeat within the batch; one across batches is found by the unique key when it is written).
 */
export class BatchEncoder {
  private readonly stream = stageCopy.stream();
  private inBatch = new Set<string>();

  constructor(
    private readonly brandId: string,
    private readonly reconciliationId: string,
  ) {}

  /** Adds the row, or returns false when its order_id is already in the batch (the row is not added). */
  add(line: number, row: BrandRow): boolean {
    if (this.inBatch.has(row.order_id)) return false;
    this.inBatch.add(row.order_id);
    this.stream.add({
      brand_id: this.brandId,
      reconciliation_id: this.reconciliationId,
      line,
      order_id: row.order_id,
      status: row.status,
      amount: row.amount,
      currency: row.currency,
      fx_rate: row.fx_rate ?? null,
      refunded_amount: row.refunded_amount,
      occurred_at: row.occurred_at === undefined ? null : Date.parse(row.occurred_at),
      coupon_code: row.coupon_code ?? null,
      click_ref: row.click_ref ?? null,
      customer_hash: row.customer_hash ?? null,
      parent_order_id: row.parent_order_id ?? null,
    });
    return true;
  }

  get rows(): number {
    return this.stream.rows;
  }

  /** The rows added since the last take, as one COPY's data (its own memory, which can move to another thread). */
  take(): Batch | undefined {
    const rows = this.stream.rows;
    if (rows === 0) return undefined;
    this.inBatch = new Set();
    const data = this.stream.take();
    // Moved to another thread whole: its own memory (a batch's bytes are past Buffer's pool size).
    return { data: ownsMemory(data) ? data : new Uint8Array(data), rows };
  }
}

/**
 * The line of the row with `orderId` in a batch's COPY data (read only when PostgreSQL refused
 * the batch for a repeated order_id): per row the field count, then each field's length and bytes;
 * the line is the third field, the order_id the fourth.
 */
export function lineInBatch(data: Uint8Array, orderId: string): number | undefined {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const wanted = Buffer.from(orderId, 'utf8');
  // Signature (11 bytes), flags and header extension length.
  let at = 11 + 8 + view.getInt32(15);
  while (at + 2 <= data.byteLength) {
    const fields = view.getInt16(at);
    at += 2;
    if (fields < 0) break;
    let line: number | undefined;
    let found = false;
    for (let f = 0; f < fields; f++) {
      const length = view.getInt32(at);
      at += 4;
      if (length < 0) continue;
      if (f === 2) line = view.getInt32(at);
      else if (f === 3) found = Buffer.from(data.buffer, data.byteOffset + at, length).equals(wanted);
      at += length;
    }
    if (found) return line;
  }
  return undefined;
}

/** Whether the bytes are all of their ArrayBuffer (not a slice of a shared one): they can move to another thread whole. */
export const ownsMemory = (data: Uint8Array) =>
  data.byteOffset === 0 && data.byteLength === data.buffer.byteLength;

/**
 * Frees a written batch's memory now (the ArrayBuffer detached), not at the next collection: the
 * event loop makes so little garbage between batches that written batches waited for a full
 * collection, pushed by their own mass, and with them the web's RSS grew by tens of megabytes.
 */
export function releaseBatch(data: Uint8Array): void {
  if (!ownsMemory(data)) return;
  const buffer = data.buffer as ArrayBuffer & { transfer?: (length: number) => ArrayBuffer };
  buffer.transfer?.(0);
}
