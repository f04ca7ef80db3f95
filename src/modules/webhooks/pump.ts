import type { MikroORM } from '@mikro-orm/postgresql';
import { inTransaction, queryOnce } from '../../db/fast-path/index.js';
import { DELIVERY_TIMEOUT_MS, deliverySchedule, disableFailingEndpoints, retryDelayMs } from './delivery.js';
import type { PumpSession } from './endpoint-pumps.js';
import { eventBody } from './event-types.js';
import { MAX_SOCKETS_PER_ENDPOINT, postWebhook } from './http-post.js';
import {
  type AttemptRecord,
  type ClaimedRow,
  cancelClaimed,
  claimDue,
  nextDue,
  recordBatch,
  releaseClaimed,
} from './pump-statements.js';
import { decryptSecret } from './secrets.js';
import { SIGNATURE_HEADER, signatureHeader } from './signing.js';
import type { Resolver, UrlPolicy } from './url-guard.js';

/** Deliveries a claim takes at most (one statement to claim them, one to record them). */
export const MAX_BATCH = 200;
/** A batch is sized to take about this long at the endpoint's pace (a slow endpoint's claims stay small and short-leased). */
const BATCH_TARGET_MS = 2_000;
/** A pump hands its worker slot back after this long (a wake-up goes to the back of the queue), so busy endpoints take turns. */
export const MAX_PUMP_MS = 30_000;
/** A delivery may be claimed this much before its next attempt (the clocks of workers differ). */
const EARLY_TOLERANCE_MS = 1000;

export interface PumpTarget {
  brandId: string;
  endpointId: string;
}

export interface PumpOptions {
  secretKeyBase: string;
  policy: UrlPolicy;
  timeoutMs?: number;
  resolve?: Resolver;
  now?: () => Date;
  /** Requests at once to the endpoint (the per-process cap). */
  inFlight?: number;
  maxBatch?: number;
  maxRunMs?: number;
  /** Each batch's counts, once recorded (the worker logs them). */
  onBatch?: (batch: BatchOutcome) => void;
}

export interface BatchOutcome {
  claimed: number;
  delivered: number;
  failed: number;
  /** Failed for good: no attempts left. */
  final: number;
  canceled: number;
  released: number;
  /** Distinct errors of the failed attempts with their counts, and a few of their delivery ids. */
  errors: Record<string, number>;
  failed_ids: string[];
  /** The requests' time (the first sent to the last answered), the claim's and the record's. */
  ms: number;
  claim_ms: number;
  record_ms: number;
}

export interface PumpOutcome {
  batches: number;
  delivered: number;
  failed: number;
  canceled: number;
  released: number;
  /** drained: nothing due is left; yielded: it ran MAX_PUMP_MS, or the process is stopping, with more due. */
  ended: 'drained' | 'yielded' | 'stopping';
  /** When the endpoint's next pending delivery is due (a retry), after a drain. */
  next_attempt_at: Date | null;
}

/** A session for a pump run on its own (tests; a registry gives the worker's). */
export const soloSession = (): PumpSession => ({
  claimAgain: () => false,
  release: () => {},
  stopping: false,
});

/**
 * Delivers one endpoint's due deliveries in batches: claims up to a batch of them in
 * one statement, sends them in order over the endpoint's kept-alive connections with at most
 * `inFlight` requests at once, each signed and checked against the SSRF rules (http-post.ts),
 * records the batch's results in one statement, and claims again until none is due. A failed
 * attempt is due again after the documented schedule, counted by the delivery's own attempts;
 * its last one makes it `failed`. Order within the endpoint: by next attempt, then creation.
 */
export async function pumpEndpoint(
  orm: MikroORM,
  target: PumpTarget,
  options: PumpOptions,
  session: PumpSession = soloSession(),
): Promise<PumpOutcome> {
  const now = options.now ?? (() => new Date());
  const inFlight = options.inFlight ?? MAX_SOCKETS_PER_ENDPOINT;
  const maxBatch = options.maxBatch ?? MAX_BATCH;
  const timeoutMs = options.timeoutMs ?? DELIVERY_TIMEOUT_MS;
  const started = Date.now();
  const outcome: PumpOutcome = {
    batches: 0,
    delivered: 0,
    failed: 0,
    canceled: 0,
    released: 0,
    ended: 'drained',
    next_attempt_at: null,
  };
  // The first claim is small until the endpoint's pace is known.
  let limit = Math.min(maxBatch, inFlight * 4);
  // The previous batch's record, running while the next claim does (its deliveries are leased:
  // the claim cannot take them again). Every path below waits for it before the pump stops.
  let recording: Promise<BatchOutcome> | null = null;
  const tally = (batch: BatchOutcome) => {
    outcome.batches++;
    outcome.delivered += batch.delivered;
    outcome.failed += batch.failed;
    outcome.canceled += batch.canceled;
    outcome.released += batch.released;
    options.onBatch?.(batch);
  };
  const recorded = async () => {
    if (!recording) return;
    const batch = await recording;
    recording = null;
    tally(batch);
  };
  for (;;) {
    // The lease outlives the batch even if every request waits for its timeout.
    const leaseSeconds = Math.ceil(limit / inFlight) * Math.ceil(timeoutMs / 1000) + 20;
    const claimStarted = Date.now();
    const [rows, previous] = await Promise.all([
      queryOnce<ClaimedRow>(orm, claimDue, [
        target.brandId,
        target.endpointId,
        new Date(now().getTime() + EARLY_TOLERANCE_MS),
        limit,
        leaseSeconds,
        target.brandId,
        target.brandId,
        target.brandId,
        target.endpointId,
      ]),
      recording,
    ]);
    const claimMs = Date.now() - claimStarted;
    recording = null;
    if (previous) tally(previous);
    const claimedAll = rows.length === limit;
    if (rows.length > 0) {
      const batch = await deliverBatch(orm, target, rows, { ...options, inFlight, timeoutMs }, session, now);
      recording = batch.recorded.then((b) => ({ ...b, claim_ms: claimMs }));
      // Sized so a batch takes about BATCH_TARGET_MS at the pace just seen.
      if (batch.sent > 0) {
        const perRequest = Math.max(1, (batch.ms * Math.min(inFlight, batch.sent)) / batch.sent);
        limit = Math.max(inFlight, Math.min(maxBatch, Math.floor((inFlight * BATCH_TARGET_MS) / perRequest)));
      }
    }
    if (session.stopping) {
      await recorded();
      session.release();
      outcome.ended = 'stopping';
      return outcome;
    }
    if (claimedAll) {
      if (Date.now() - started < (options.maxRunMs ?? MAX_PUMP_MS)) continue;
      await recorded();
      session.release();
      outcome.ended = 'yielded';
      return outcome;
    }
    // Nothing more was due at the claim: stop once recorded, unless a wake-up came in meanwhile.
    await recorded();
    if (!session.claimAgain()) break;
  }
  const [next] = await queryOnce<{ next_attempt_at: string }>(orm, nextDue, [
    target.brandId,
    target.endpointId,
    new Date(now().getTime() + EARLY_TOLERANCE_MS),
  ]);
  outcome.next_attempt_at = next ? new Date(next.next_attempt_at) : null;
  return outcome;
}

/**
 * Sends one claimed batch (canceling what its endpoint no longer takes), and starts its record:
 * `recorded` settles once the results are in PostgreSQL. `ms`: the requests' time; `sent`: how many went.
 */
async function deliverBatch(
  orm: MikroORM,
  target: PumpTarget,
  rows: ClaimedRow[],
  options: PumpOptions & { inFlight: number; timeoutMs: number },
  session: PumpSession,
  now: () => Date,
): Promise<{ ms: number; sent: number; recorded: Promise<BatchOutcome> }> {
  const outcome: BatchOutcome = {
    claimed: rows.length,
    delivered: 0,
    failed: 0,
    final: 0,
    canceled: 0,
    released: 0,
    errors: {},
    failed_ids: [],
    ms: 0,
    claim_ms: 0,
    record_ms: 0,
  };
  const endpoint = rows[0]!;
  const enabled = endpoint.endpoint_id !== null && endpoint.endpoint_status === 'enabled';
  const cancel = async (why: string, ids: string[]) => {
    if (ids.length === 0) return;
    await queryOnce(orm, cancelClaimed, ['canceled', why, target.brandId, JSON.stringify(ids)]);
    outcome.canceled += ids.length;
  };
  if (!enabled) {
    await cancel(
      endpoint.endpoint_id === null ? 'endpoint deleted' : 'endpoint disabled',
      rows.map((r) => r.id),
    );
    return { ms: 0, sent: 0, recorded: Promise.resolve(outcome) };
  }
  // A delivery of another mode than its endpoint's is one whose endpoint is gone (ids are not reused).
  const sendable = rows.filter((r) => r.livemode === r.endpoint_livemode);
  await cancel(
    'endpoint deleted',
    rows.filter((r) => r.livemode !== r.endpoint_livemode).map((r) => r.id),
  );
  const secrets = signingSecrets(endpoint, options.secretKeyBase, now());
  const records: AttemptRecord[] = [];
  const unsent: string[] = [];
  let next = 0;
  // `inFlight` lanes take the deliveries in claim order: at most that many requests at once.
  const lane = async () => {
    while (next < sendable.length) {
      const row = sendable[next++]!;
      if (session.stopping) {
        unsent.push(row.id);
        continue;
      }
      records.push(await attempt(row, endpoint.url!, secrets, options, now));
    }
  };
  const sendStarted = Date.now();
  await Promise.all(Array.from({ length: Math.min(options.inFlight, sendable.length) }, lane));
  outcome.ms = Date.now() - sendStarted;
  const recorded = (async () => {
    const recordStarted = Date.now();
    if (unsent.length > 0) {
      await queryOnce(orm, releaseClaimed, [target.brandId, JSON.stringify(unsent)]);
      outcome.released = unsent.length;
    }
    if (records.length > 0) await record(orm, target, records, now());
    outcome.record_ms = Date.now() - recordStarted;
    for (const r of records) {
      if (r.status === 'succeeded') {
        outcome.delivered++;
        continue;
      }
      outcome.failed++;
      if (r.status === 'failed') outcome.final++;
      const error = r.error ?? 'failed';
      outcome.errors[error] = (outcome.errors[error] ?? 0) + 1;
      if (outcome.failed_ids.length < 10) outcome.failed_ids.push(r.id);
    }
    return outcome;
  })();
  return { ms: outcome.ms, sent: records.length, recorded };
}

/** The endpoint's secrets that sign now: its own, and the previous one while it is rolling. */
function signingSecrets(endpoint: ClaimedRow, secretKeyBase: string, at: Date): string[] {
  const secrets = [decryptSecret(endpoint.secret_ciphertext!, secretKeyBase)];
  const previous = endpoint.previous_secret_ciphertext;
  const until = endpoint.previous_secret_expires_at;
  if (previous && until && new Date(until) > at) secrets.push(decryptSecret(previous, secretKeyBase));
  return secrets;
}

/** One POST of one delivery: the event's body rebuilt byte for byte, signed; its result as recorded. */
async function attempt(
  row: ClaimedRow,
  url: string,
  secrets: string[],
  options: PumpOptions & { timeoutMs: number },
  now: () => Date,
): Promise<AttemptRecord> {
  const body = JSON.stringify(
    eventBody({
      id: row.event_id,
      type: row.type,
      created_at: row.event_created_at,
      livemode: row.livemode,
      api_version: row.api_version,
      request_id: row.event_request_id,
      data: row.data,
    }),
  );
  const at = now();
  const result = await postWebhook(
    url,
    body,
    {
      'Content-Type': 'application/json',
      'User-Agent': 'LF-Webhooks/1.0',
      [SIGNATURE_HEADER]: signatureHeader(secrets, Math.floor(at.getTime() / 1000), body),
      'LF-Event-Id': row.event_id,
    },
    {
      timeoutMs: options.timeoutMs,
      policy: options.policy,
      endpoint: row.endpoint_id!,
      ...(options.resolve && { resolve: options.resolve }),
    },
  );
  const doneAt = now();
  const base = {
    id: row.id,
    status_code: result.statusCode,
    duration_ms: result.durationMs,
    attempt_at: at.toISOString(),
  };
  if (result.ok) {
    return {
      ...base,
      status: 'succeeded',
      error: null,
      next_attempt_at: null,
      delivered_at: doneAt.toISOString(),
    };
  }
  // The delivery's own count decides: its last attempt makes it failed, never sent again.
  const attemptNumber = row.attempts + 1;
  const final = attemptNumber >= deliverySchedule.attempts;
  const { backoffMs, jitter } = deliverySchedule;
  return {
    ...base,
    status: final ? 'failed' : 'pending',
    error: result.error ?? 'failed',
    next_attempt_at: final
      ? null
      : new Date(doneAt.getTime() + retryDelayMs(backoffMs, jitter, attemptNumber)).toISOString(),
    delivered_at: null,
  };
}

/** Records a batch in one statement; with failures, in a transaction that also disables an endpoint failing for 3 days. */
async function record(orm: MikroORM, target: PumpTarget, records: AttemptRecord[], at: Date) {
  let lastSuccess: string | null = null;
  for (const r of records)
    if (r.delivered_at && (!lastSuccess || r.delivered_at > lastSuccess)) lastSuccess = r.delivered_at;
  const failures = records.filter((r) => r.status !== 'succeeded');
  const after = failures.filter((r) => !lastSuccess || r.attempt_at > lastSuccess).map((r) => r.attempt_at);
  const failingFrom = after.length > 0 ? after.reduce((a, b) => (a < b ? a : b)) : null;
  const lastFailure =
    failures.length > 0 ? failures.map((r) => r.attempt_at).reduce((a, b) => (a > b ? a : b)) : null;
  const params = [
    JSON.stringify(records),
    target.brandId,
    lastSuccess,
    failingFrom,
    failingFrom,
    lastSuccess,
    lastFailure,
    target.brandId,
    target.endpointId,
    lastFailure,
    lastSuccess,
  ];
  if (failures.length === 0) {
    await queryOnce(orm, recordBatch, params);
    return;
  }
  await inTransaction(orm, async (sql) => {
    await sql.query(recordBatch, params);
    await disableFailingEndpoints(sql, at, target);
  });
}
