import type { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import type { Config } from '../../config.js';
import { citusInstalled } from '../../db/citus-installed.js';
import { brandShardsProblem, inTransactionOn, missingStoredStatements } from '../../db/fast-path/index.js';
import { lostRace } from '../../db/retry.js';
import { DatabaseNotMigrated } from '../../db/unavailable.js';
import type { Queues } from '../../jobs/queues.js';
import type { Logger } from '../../logger.js';
import { OutboxRelay } from '../../outbox/outbox.js';
import { storageRefusal } from '../../shared/errors.js';
import {
  commitGroup,
  dryRunRequest,
  type IngestAnswer,
  type IngestRequest,
  ingestionStatements,
} from './commit-group.js';
import { ENGINE_TRANSACTION_SETTINGS } from './engine-settings.js';
import { GroupCommit, type Settled } from './group-commit.js';
import { idempotencyLockName, isKeyInFlight } from './idempotency.js';

export type { IngestAnswer, IngestRequest };

/** Group bounds: a group's load and write statements stay a few MiB of JSON at most. */
const MAX_GROUP_EVENTS = 1000;
const MAX_GROUP_BYTES = 4 * 1024 * 1024;
/** A transaction that lost a race to another process is rerun whole, this many times in all. */
const RACE_ATTEMPTS = 4;
/** How often a request whose key another process holds looks again. */
const KEY_POLL_MS = 25;

export interface IngestionOptions {
  /**
   * Groups in flight at once, each on its own connection: with two, one group's load and
   * planning overlap the other's write and WAL flush, and PostgreSQL works on both cores
   * (docs/benchmarks.md: batches 6,000 → 9,900 events/s). A lane beyond the first opens only
   * while half a group waits (group-commit.ts). Default DATABASE_INGESTION_POOL_MAX.
   */
  lanes?: number;
  /**
   * How long a request waits for its Idempotency-Key's first request when that one is still
   * running in another process (same process: it waits for the next group anyway). Then it is
   * answered as that request was (a replay), or runs itself if that one failed; still held
   * after this long: 409 idempotency_key_reused. Default 5 s.
   */
  keyWaitMs?: number;
}

/**
 * The ingestion engine's entry point: `submit` one request's validated events and get its own
 * answer once the group it joined has committed. It owns group commit, race reruns,
 * idempotency, the transaction and the outbox nudge (README "Group commit").
 *
 * Its connections are its own pool, its transactions run with sequential scans disabled: together with
 * load-book.ts's single-index probes and write-set.ts's upserts by key, the only plans left
 * are index probes on unique keys, whatever the statistics say (docs/decisions.md).
 */
export class Ingestion {
  private pool: pg.Pool | undefined;
  /** The check that the stored statements are there, once per process (again after a failure). */
  private installed: Promise<void> | undefined;
  /**
   * The database is a Citus coordinator (found with the statements' check): a group's
   * transaction then holds one brand's requests, so it runs on one worker (docs/scale-out.md).
   */
  private onCitus = false;
  private readonly relay: OutboxRelay;
  private readonly lane: GroupCommit<IngestRequest, IngestAnswer>;
  private readonly keyWaitMs: number;
  private readonly lanes: number;
  /** Committed groups and the requests in them, reruns after lost races, groups split after a failure. */
  /** `copied`: groups whose new rows went in by COPY (commit-group.ts `COPY_FROM_ORDERS`). */
  /** `programApart`: groups whose programs' rows took a statement of their own (program-book.ts). */
  readonly stats = { groups: 0, requests: 0, reruns: 0, isolated: 0, copied: 0, programApart: 0 };

  constructor(
    private readonly deps: { config: Config; orm: MikroORM; queues: Queues; logger: Logger },
    options: IngestionOptions = {},
  ) {
    this.relay = new OutboxRelay(deps.orm, deps.queues, deps.logger);
    this.keyWaitMs = options.keyWaitMs ?? 5_000;
    this.lanes = options.lanes ?? deps.config.DATABASE_INGESTION_POOL_MAX;
    this.lane = new GroupCommit({
      lanes: this.lanes,
      extraLaneAt: MAX_GROUP_EVENTS / 2,
      maxEvents: MAX_GROUP_EVENTS,
      maxBytes: MAX_GROUP_BYTES,
      size: (r) => ({ events: Math.max(r.events.length, 1), bytes: r.bytes }),
      exclusiveKey: (r) =>
        r.idempotency &&
        idempotencyLockName({ brandId: r.caller.brandId, livemode: r.caller.livemode }, r.idempotency.key),
      // On Citus a group forms of one brand's requests: its transaction runs on the brand's
      // worker, and the brand's concurrent requests still share it. Plain PostgreSQL groups
      // across brands: fewer, larger groups, each commit's cost shared by more requests.
      groupKey: (r) => (this.onCitus ? r.caller.brandId : undefined),
      run: (group) => this.runGroup(group),
    });
  }

  async submit(request: IngestRequest): Promise<IngestAnswer> {
    // Monotonic and sub-millisecond: Date.now() could end the wait up to 1 ms early, or late when the wall clock steps.
    const deadline = performance.now() + this.keyWaitMs;
    for (;;) {
      const answer = await this.lane.submit(request);
      // A client retrying after its own timeout may reach another web process than its first try.
      if (!isKeyInFlight(answer) || performance.now() >= deadline) return answer;
      await new Promise((resolve) => setTimeout(resolve, KEY_POLL_MS));
    }
  }

  /**
   * What `submit` would answer now, in a read-only transaction that locks nothing: no order,
   * journal movement, idempotency record or outbox row is written (`?dry_run=true`).
   */
  async dryRun(request: IngestRequest): Promise<IngestAnswer> {
    await this.statementsInstalled();
    return inTransactionOn(
      this.connections(),
      async (sql) => {
        await sql.query('set transaction read only');
        return dryRunRequest(sql, request, {
          now: new Date(),
          gapDelayMinutes: this.deps.config.ORDER_GAP_DELAY_MINUTES,
          oneBrand: this.onCitus,
          secretKeyBase: this.deps.config.SECRET_KEY_BASE,
        });
      },
      ENGINE_TRANSACTION_SETTINGS,
    );
  }

  async close(): Promise<void> {
    await this.lane.idle();
    await this.relay.idle();
    await this.pool?.end();
    this.pool = undefined;
  }

  private connections(): pg.Pool {
    if (!this.pool) {
      this.pool = new pg.Pool({
        connectionString: this.deps.config.DATABASE_URL,
        max: this.lanes,
        idleTimeoutMillis: 30_000,
      });
      // An idle connection that dies (database restart, a test dropping its database) is replaced on next use.
      this.pool.on('error', (err) =>
        this.deps.logger.warn({ err: err.message }, 'ingestion connection lost'),
      );
      // A checked-out one emits on itself, not the pool: unheard, that would crash the process.
      // Its statement in flight rejects on its own and the group is answered retryable.
      this.pool.on('connect', (client) => client.on('error', () => {}));
    }
    return this.pool;
  }

  /** One transaction for the group; a lost race reruns it; any other failure isolates each request. */
  private async runGroup(group: IngestRequest[]): Promise<Settled<IngestAnswer>[]> {
    try {
      return (await this.commit(group)).map((value) => ({ ok: true, value }));
    } catch (err) {
      if (group.length === 1) return [this.failed(group[0]!, err)];
      // One request's bad row (a database error, not a planning error) must not fail the
      // others: each runs alone, and only the culprit gets the error.
      this.stats.isolated++;
      this.deps.logger.warn(
        { err, requests: group.length },
        'group commit failed; retrying its requests one by one',
      );
      const settled: Settled<IngestAnswer>[] = [];
      for (const request of group) {
        try {
          settled.push({ ok: true, value: (await this.commit([request]))[0]! });
        } catch (error) {
          settled.push(this.failed(request, error));
        }
      }
      return settled;
    }
  }

  /**
   * A request that failed alone. A value PostgreSQL refuses (a data exception) fails the same way
   * on every resend: that request's own non-retryable 422, like any validation error; anything
   * else stays a thrown error (a retryable 500).
   */
  private failed(request: IngestRequest, err: unknown): Settled<IngestAnswer> {
    const refused = storageRefusal(err);
    if (!refused) return { ok: false, error: err };
    this.deps.logger.warn(
      { err, request_id: request.requestId },
      'the database refused a value of an ingestion request',
    );
    return { ok: true, value: { ok: false, error: refused } };
  }

  /**
   * The release's stored statements are created by `npm run migrate` (db/orm.ts `migrateUp`), not
   * here: a database that lacks one answers the request 503 (retryable; the log line names the
   * fix), and is asked
   * again by the next (a deploy that ran its web processes before its migrations heals itself).
   */
  private statementsInstalled(): Promise<void> {
    this.installed ??= (async () => {
      const missing = await missingStoredStatements(this.connections(), ingestionStatements);
      if (missing.length > 0)
        throw new DatabaseNotMigrated(
          `the database lacks ${missing.length} stored statement(s) of this release (${missing.slice(0, 3).join(', ')}${missing.length > 3 ? ', …' : ''}): run npm run migrate, which creates them`,
        );
      const problem = await brandShardsProblem(this.connections());
      if (problem) throw new DatabaseNotMigrated(problem);
      this.onCitus = await citusInstalled((text) => this.connections().query(text));
    })().catch((err) => {
      this.installed = undefined;
      throw err;
    });
    return this.installed;
  }

  private async commit(group: IngestRequest[]): Promise<IngestAnswer[]> {
    await this.statementsInstalled();
    // On Citus one transaction per brand: a group spanning brands would be a distributed
    // transaction over several workers (two-phase commit). Groups form per brand (groupKey
    // above) once the extension is known; only a group formed before that is split here.
    const brands = this.onCitus ? Map.groupBy(group, (r) => r.caller.brandId) : undefined;
    if (brands && brands.size > 1) {
      const answers = new Map<IngestRequest, IngestAnswer>();
      for (const part of brands.values()) {
        const partAnswers = await this.commit(part);
        part.forEach((r, i) => {
          answers.set(r, partAnswers[i]!);
        });
      }
      return group.map((r) => answers.get(r)!);
    }
    for (let attempt = 1; ; attempt++) {
      try {
        const now = new Date();
        const { answers, handedOver, copied, programApart } = await inTransactionOn(
          this.connections(),
          (sql) =>
            commitGroup(sql, group, {
              now,
              gapDelayMinutes: this.deps.config.ORDER_GAP_DELAY_MINUTES,
              oneBrand: this.onCitus,
              secretKeyBase: this.deps.config.SECRET_KEY_BASE,
            }),
          ENGINE_TRANSACTION_SETTINGS,
        );
        this.stats.groups++;
        this.stats.requests += group.length;
        if (copied) this.stats.copied++;
        if (programApart) this.stats.programApart++;
        // Committed: hand the new outbox rows to BullMQ now; the worker's relay catches anything this misses.
        if (handedOver > 0) this.relay.nudge();
        return answers;
      } catch (err) {
        if (attempt >= RACE_ATTEMPTS || !lostRace(err)) throw err;
        this.stats.reruns++;
      }
    }
  }
}
