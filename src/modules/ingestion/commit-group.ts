import { hotWrite, type Sql, type WritePart } from '../../db/fast-path/index.js';
import type { OutboxEntry } from '../../outbox/outbox.js';
import type { AppError } from '../../shared/errors.js';
import type { ApiCaller } from '../keys/caller.js';
import { ENGINE_TRANSACTION_SETTINGS } from './engine-settings.js';
import { idempotencyLockName, keyInFlight, keyReusedWithOtherRequest, lockKeys } from './idempotency.js';
import { type KeyProbe, loadOrderBooks, loadStatements } from './load-book.js';
import { scopeKey } from './order-book.js';
import { type AcceptedEvent, planRequest } from './plan-request.js';
import { loadPrograms, programStatements, writeMonthsApart } from './program-book.js';
import type { ValidEvent } from './valid-event.js';
import type { GroupWritePart, GroupWrites, IdempotencyRow, ReceivedEventRow } from './write-set.js';
import { groupWrites, unpricedNewOrders } from './write-set.js';

/** One HTTP request's events, validated by the intake. */
export interface IngestRequest {
  caller: Pick<ApiCaller, 'brandId' | 'livemode' | 'kind' | 'terms'>;
  /** The events to apply, in order; for a batch, those before the first invalid one. */
  events: ValidEvent[];
  batch: boolean;
  /** The batch's first invalid event (found by the intake), answered after the events before it are applied. */
  invalid?: AppError;
  requestId: string;
  idempotency?: { key: string; hash: string };
  /** Request body size, for the group's byte bound. */
  bytes: number;
}

export type IngestAnswer =
  | { ok: true; status: number; body: unknown; replayed: boolean }
  | { ok: false; error: AppError };

const everyPart = Object.keys(groupWrites([], [], [], [])) as GroupWritePart[];
/**
 * The last shape's parts: all but the creator-months, which a group needing them beside every
 * other part writes in a statement of its own (program-book.ts `writeMonthsApart`): a brand's
 * statement on its worker passes its arguments to one function call, and PostgreSQL takes at
 * most 100.
 */
const mostParts = everyPart.filter((part) => part !== 'monthCommissions');

/**
 * The shapes a group's write takes, each a stored statement kept planned in the database: a
 * group uses the first whose parts cover every part it fills (empty parts stay in, so a shape's
 * text never varies), the last has them all. Every part of a statement costs PostgreSQL its
 * executor set-up and its statement triggers whether it holds rows or not: for a group of
 * single events, more than its empty parts' share (docs/benchmarks.md, "Profile notes").
 */
const shapeParts: GroupWritePart[][] = [
  // New orders paid: single events' and most batches' groups.
  ['newOrders', 'movements', 'receivedEvents', 'conversionTallies', 'integrationTallies'],
  [
    'newOrders',
    'movements',
    'receivedEvents',
    'conversionTallies',
    'integrationTallies',
    'idempotencyRecords',
  ],
  // Refunds, cancellations and confirmations of known orders.
  ['changedOrders', 'refunds', 'movements', 'receivedEvents', 'conversionTallies', 'integrationTallies'],
  // The same two under a monthly cap: the creator-months they move (program-book.ts).
  ['newOrders', 'movements', 'receivedEvents', 'conversionTallies', 'integrationTallies', 'monthCommissions'],
  [
    'changedOrders',
    'refunds',
    'movements',
    'receivedEvents',
    'conversionTallies',
    'integrationTallies',
    'monthCommissions',
  ],
  // Browser signals (a page view, an observed order), which hand work to the gap sweep.
  ['receivedEvents', 'browserSignalTallies', 'integrationTallies', 'outbox'],
  mostParts,
];

/**
 * The parts a big group of new orders sends by COPY (db/fast-path/copy-rows.ts): its new rows.
 * Nothing reads them in between, so any order does; received events first, so a group held behind
 * a lock on them waits before it has written anything.
 */
const copiedParts: GroupWritePart[] = ['receivedEvents', 'movements', 'newOrders'];

/**
 * New orders from which a group copies its new rows in rather than inserting them: each COPY is
 * a round trip and a statement of its own, worth it for a batch, not for a group of single
 * events (about 31 at 64 connections, never over 64 unless more connections wait).
 */
export const COPY_FROM_ORDERS = 100;

/**
 * A shape's stored write: as it is, one brand's on Citus (where a group is one brand's:
 * ingestion.ts), and for shapes that write new orders, the form that copies a big group's new
 * rows in ahead of the rest.
 */
const template = groupWrites([], [], [], []);
const shapeWrite = (parts: readonly GroupWritePart[], newOrders = template.newOrders) =>
  hotWrite(
    parts.map((part) => (part === 'newOrders' ? newOrders : template[part])),
    {
      settings: ENGINE_TRANSACTION_SETTINGS,
      copied: parts.includes('newOrders')
        ? copiedParts.map((part) => (part === 'newOrders' ? newOrders : template[part]))
        : [],
    },
  );
export type WriteShape = {
  parts: readonly GroupWritePart[];
  write: ReturnType<typeof shapeWrite>;
  /** The parts' rows as this shape writes them (the unpriced form's new orders without the program's columns). */
  partsOf?: (writes: GroupWrites) => WritePart[];
};
const writeShapes: WriteShape[] = shapeParts.map((parts) => ({ parts, write: shapeWrite(parts) }));
/**
 * New orders paid that no program priced (every brand without a published version, and orders
 * before a version's effective_from): the first shape without the orders' two program columns.
 */
const unpricedNewOrdersShape: WriteShape = {
  parts: shapeParts[0]!,
  write: shapeWrite(shapeParts[0]!, unpricedNewOrders(template.newOrders)!),
  partsOf: (writes) =>
    shapeParts[0]!.map((part) =>
      part === 'newOrders' ? unpricedNewOrders(writes.newOrders)! : writes[part],
    ),
};

/**
 * The smallest shape that holds every part the group fills; the first shape's unpriced form when
 * none of its new orders was priced. Pure: exported for its unit test (test/unit/write-shapes.test.ts).
 */
export function writeShapeOf(writes: GroupWrites): WriteShape {
  const filled = everyPart.filter((part) => writes[part].rows.length > 0);
  const shape =
    writeShapes.find((s) => filled.every((part) => s.parts.includes(part))) ?? writeShapes.at(-1)!;
  return shape === writeShapes[0] && unpricedNewOrders(writes.newOrders) ? unpricedNewOrdersShape : shape;
}

/**
 * The engine's statements that run as stored statements: created by `npm run migrate` (db/orm.ts
 * `migrateUp`), never by the web process, which checks they are there before its first transaction.
 */
export const ingestionStatements = [
  ...new Map(
    [
      ...loadStatements,
      ...programStatements,
      // The unpriced shape's copying form is the first shape's (its new orders go by COPY): one function.
      ...[...writeShapes, unpricedNewOrdersShape].flatMap((shape) => shape.write.statements),
    ].map((statement) => [statement.name, statement]),
  ).values(),
];

const scopeOf = (r: IngestRequest) => ({ brandId: r.caller.brandId, livemode: r.caller.livemode });

export interface GroupOptions {
  now: Date;
  gapDelayMinutes: number;
  /** Citus: the group is one brand's (ingestion.ts). */
  oneBrand?: boolean;
  /** Verifies signed click references (attribution/click-reference.ts). */
  secretKeyBase: string;
}

/** What a group's planning produced: one answer per request and the writes that make them true. */
interface GroupPlan {
  answers: IngestAnswer[];
  writes: GroupWrites;
  handedOver: number;
  /** Its programs' rows were not all read with the load: their own statement ran (program-book.ts). */
  programApart: boolean;
}

/**
 * Plans a group of requests, of any brands and modes (of one brand with `oneBrand`: Citus,
 * ingestion.ts), without writing: lock their
 * Idempotency-Keys, load and lock every row they name in one query, plan each request in
 * arrival order (its error stays its own). A dry run takes no lock and reads its snapshot: it
 * answers what a real send would at this moment and leaves no trace.
 */
async function planGroup(
  sql: Sql,
  requests: readonly IngestRequest[],
  options: GroupOptions & { dryRun?: boolean },
): Promise<GroupPlan> {
  const lock = !options.dryRun;
  const answers: (IngestAnswer | undefined)[] = requests.map(() => undefined);
  const keyed = requests.flatMap((r, i) => (r.idempotency ? [{ r, i }] : []));
  const locked = lock
    ? await lockKeys(
        sql,
        keyed.map(({ r }) => idempotencyLockName(scopeOf(r), r.idempotency!.key)),
      )
    : keyed.map(() => true);
  const probes: KeyProbe[] = [];
  keyed.forEach(({ r, i }, n) => {
    if (!locked[n]) answers[i] = { ok: false, error: keyInFlight() };
    else probes.push({ i, brand_id: r.caller.brandId, livemode: r.caller.livemode, key: r.idempotency!.key });
  });

  const live = requests.filter((_, i) => !answers[i]);
  const { books, responses, versions, programRows } = await loadOrderBooks(
    sql,
    live.map((r) => ({ scope: scopeOf(r), terms: r.caller.terms, events: r.events })),
    probes,
    options.now,
    {
      lock,
      secretKeyBase: options.secretKeyBase,
      ...(options.oneBrand && requests[0] ? { oneBrand: requests[0].caller.brandId } : {}),
    },
  );
  const oneBrand = options.oneBrand && requests[0] ? requests[0].caller.brandId : undefined;
  const programApart = await loadPrograms(
    sql,
    books,
    versions,
    (book) => live.filter((r) => scopeKey(scopeOf(r)) === scopeKey(book.scope)).flatMap((r) => r.events),
    {
      lock,
      ...(oneBrand === undefined ? {} : { oneBrand }),
      ...(programRows ? { preloaded: programRows } : {}),
    },
  );
  for (const stored of responses) {
    const r = requests[stored.i]!;
    answers[stored.i] =
      stored.request_hash === r.idempotency!.hash
        ? { ok: true, status: stored.response_status, body: stored.response_body, replayed: true }
        : { ok: false, error: keyReusedWithOtherRequest() };
  }

  const received: ReceivedEventRow[] = [];
  const handOver: OutboxEntry[] = [];
  const remembered: IdempotencyRow[] = [];
  requests.forEach((r, i) => {
    if (answers[i]) return;
    const plan = planRequest(books.get(scopeKey(scopeOf(r)))!, {
      events: r.events,
      batch: r.batch,
      keyKind: r.caller.kind,
      requestId: r.requestId,
      gapDelayMinutes: options.gapDelayMinutes,
      ...(options.dryRun ? { dryRun: true } : {}),
    });
    received.push(...plan.received);
    handOver.push(...plan.handOver);
    const error = plan.failure ?? r.invalid;
    if (error) {
      answers[i] = { ok: false, error };
      return;
    }
    const body: AcceptedEvent | AcceptedEvent[] = r.batch ? plan.accepted : plan.accepted[0]!;
    answers[i] = { ok: true, status: 200, body, replayed: false };
    if (r.idempotency) {
      remembered.push({
        brand_id: r.caller.brandId,
        livemode: r.caller.livemode,
        key: r.idempotency.key,
        request_hash: r.idempotency.hash,
        response_status: 200,
        response_body: body,
      });
    }
  });
  const webhookDeliveries = [...books.values()].reduce((n, b) => n + (b.webhooks?.deliveries.length ?? 0), 0);
  return {
    answers: answers as IngestAnswer[],
    writes: groupWrites(books.values(), received, handOver, remembered),
    handedOver: handOver.length + webhookDeliveries,
    programApart,
  };
}

/**
 * One transaction for a group of requests: plan them (above), then write everything in one
 * statement. Returns one answer per request and how many outbox rows were written. It commits
 * with its last statement; the answers are valid only once it has returned.
 */
export async function commitGroup(
  sql: Sql,
  requests: readonly IngestRequest[],
  options: GroupOptions,
): Promise<{ answers: IngestAnswer[]; handedOver: number; copied: boolean; programApart: boolean }> {
  const { answers, writes, handedOver, programApart } = await planGroup(sql, requests, options);
  // On Citus the group is one brand's: its write runs on the brand's worker.
  const brandId = options.oneBrand ? requests[0]?.caller.brandId : undefined;
  const copied = await writeGroup(sql, writes, brandId);
  return { answers, handedOver, copied, programApart };
}

/**
 * Writes a planned group in the smallest shape that holds it, and commits with that last
 * statement. `brandId`: the group is that brand's (Citus), its write runs on the brand's worker
 * and never copies (a COPY from the coordinator beside the call there makes the commit
 * two-phase). Returns whether the new rows went in by COPY.
 */
export async function writeGroup(
  sql: Sql,
  writes: GroupWrites,
  brandId: string | undefined,
): Promise<boolean> {
  const copy = brandId === undefined && writes.newOrders.rows.length >= COPY_FROM_ORDERS;
  const shape = writeShapeOf(writes);
  if (!shape.parts.includes('monthCommissions') && writes.monthCommissions.rows.length > 0)
    await writeMonthsApart(sql, writes.monthCommissions.rows, brandId);
  // The last statement: COMMIT goes with it.
  await shape.write.commit(sql, shape.partsOf?.(writes) ?? shape.parts.map((part) => writes[part]), {
    ...(brandId === undefined ? {} : { brandId }),
    copy,
  });
  return copy;
}

/** A request's answer as a real send would get it now, with nothing written and nothing locked. */
export async function dryRunRequest(
  sql: Sql,
  request: IngestRequest,
  options: GroupOptions,
): Promise<IngestAnswer> {
  const { answers } = await planGroup(sql, [request], { ...options, dryRun: true });
  return answers[0]!;
}
