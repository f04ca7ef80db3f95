// The batch path's JavaScript without HTTP or a database: each 500-event body is parsed,
// validated, planned against a demo-shaped book and turned into the write's parameters and the
// answer's bytes, as the server does between reading a body and handing bytes to node-postgres.
// `npm run bench -- --instructions` counts its instructions under valgrind (bench/instructions.ts):
// a count that stays put while this machine's speed swings by a third. Three variants: the demo
// events (no lines, no program), and `--program-cost`'s events (three lines with SKUs) for a brand
// without a program and for one with its program (1,000 SKU rules, 10 tiers, both caps), the
// program's statements answered as PostgreSQL answers them.

import { BinaryArray } from '../../src/db/fast-path/binary-array.js';
import type { Transaction } from '../../src/db/fast-path/transaction.js';
import { DEMO_BRAND_ID, demoCreators, demoTerms } from '../../src/modules/admin/demo-seed.js';
import { couponCodeKey } from '../../src/modules/attribution/coupon-code.entity.js';
import { validateBatchEnvelope } from '../../src/modules/events/event-validation.js';
import { validated } from '../../src/modules/events/events.routes.js';
import { commitGroup } from '../../src/modules/ingestion/commit-group.js';
import { programStatements } from '../../src/modules/ingestion/program-book.js';
import { monthStart } from '../../src/modules/ingestion/program-state.js';
import { canonicalRules } from '../../src/modules/programs/programs.schemas.js';
import { newRequestId } from '../../src/shared/ids.js';
import { jsonArray } from '../../src/shared/json-array.js';
import { BENCH_TIER, benchLines, thousandRules } from './program-rules.js';

// The demo brand as the seed makes it, live, with its first creator's code.
const creator = demoCreators[0]!;
const caller = {
  brandId: DEMO_BRAND_ID,
  livemode: true,
  kind: 'secret' as const,
  terms: demoTerms,
};

/** What the load statement returns for new orders paid with that code: no order yet. */
const loaded = {
  orders: [],
  codes: [
    {
      brand_id: DEMO_BRAND_ID,
      code_key: couponCodeKey(creator.code),
      creator_id: creator.creatorId,
      offer_id: creator.offerId,
      commission_bps: null,
    },
  ],
  clicks: [],
  creators: [{ brand_id: DEMO_BRAND_ID, id: creator.creatorId, customer_hashes: [] }],
  refunds: [],
  responses: [],
  endpoints: [],
  versions: [],
};

/** The published version of the program variant, as the load and the compile's read return it. */
const VERSION_ID = 'cpv_bench_thousand_rules';
const PROGRAM_ZONE = 'Asia/Seoul';
const publishedAt = '2026-11-01T00:00:00.000+00:00';
const withVersion = {
  ...loaded,
  versions: [{ brand_id: DEMO_BRAND_ID, id: VERSION_ID, effective_from: publishedAt }],
};
/** `select id, time_zone, rules from commission_program_versions …` (once per process: compiled then cached). */
const versionRow = { id: VERSION_ID, time_zone: PROGRAM_ZONE, rules: canonicalRules(thousandRules()) };
const programCalls = new Set(programStatements.map((s) => s.call));

/**
 * The program's rows for the group, as its own statement answers them and as the load does once
 * the process knows the brand's versions (ingestion/program-outline.ts): the creator's tier (set
 * before the version) and its creator-month in the version's zone, locked, with what earlier
 * orders of the month earned.
 */
function programRows(now: Date) {
  return {
    tiers: [{ brand_id: DEMO_BRAND_ID, creator_id: creator.creatorId, at: publishedAt, level: BENCH_TIER }],
    offers: [],
    months: [
      {
        brand_id: DEMO_BRAND_ID,
        livemode: true,
        creator_id: creator.creatorId,
        time_zone: PROGRAM_ZONE,
        month_start: monthStart(now, PROGRAM_ZONE),
        net_commission: 1_234_567,
      },
    ],
  };
}

/**
 * `demo`: the demo events, no lines (the figures of docs/benchmarks.md before programs);
 * `lines`: `--program-cost`'s events, brand without a program; `program`: the same events, brand
 * with the program.
 */
export type PipelineVariant = 'demo' | 'lines' | 'program';
export const pipelineVariants: readonly PipelineVariant[] = ['demo', 'lines', 'program'];

export interface PipelineRun {
  events: number;
  /** Bytes of the write's parameters and of the answers: what the run produced, for its test. */
  writeBytes: number;
  answerBytes: number;
  attributed: number;
  /** Program statements answered (the program variant: the first batch's; later ones read the rows with the load). */
  programStatements: number;
}

/** `batches` bodies of `size` new order.paid events (as the bench's load sends them), end to end. */
export async function batchPipeline(
  batches: number,
  size: number,
  variant: PipelineVariant = 'demo',
): Promise<PipelineRun> {
  const run: PipelineRun = { events: 0, writeBytes: 0, answerBytes: 0, attributed: 0, programStatements: 0 };
  const program = variant === 'program';
  let now = new Date();
  // Answers what the engine asks: the load gets its rows, the program statement its rows, the
  // compile's read its version, the write (sent with COMMIT) nothing.
  const sql: Transaction = {
    query: async <R>(statement: unknown) => {
      if (!program) return [loaded] as R[];
      if (typeof statement === 'string') return [versionRow] as R[];
      if (programCalls.has((statement as { call: string }).call)) {
        run.programStatements += 1;
        return [programRows(now)] as R[];
      }
      const rows = programRows(now);
      return [
        {
          ...withVersion,
          program_tiers: rows.tiers,
          program_months: rows.months,
          program_offers: rows.offers,
        },
      ] as R[];
    },
    queryAndCommit: async <R>(_statement: unknown, values: readonly unknown[] = []) => {
      for (const value of values)
        run.writeBytes +=
          value instanceof BinaryArray ? value.bytes.length : Buffer.byteLength(value as string | Buffer);
      return [] as R[];
    },
    copyAndCommit: async (copies, _last, values) => {
      for (const { data } of copies) run.writeBytes += data.length;
      for (const value of values)
        run.writeBytes +=
          value instanceof BinaryArray ? value.bytes.length : Buffer.byteLength(value as string | Buffer);
    },
  };
  let sequence = 0;
  for (let b = 0; b < batches; b++) {
    const body = JSON.stringify({
      events: Array.from({ length: size }, () => ({
        type: 'order.paid',
        data: {
          order_id: `pipeline-${++sequence}`,
          amount: 12900,
          currency: 'KRW',
          coupon_code: creator.code,
          ...(variant === 'demo' ? {} : { amount: 129_000, items: benchLines(sequence) }),
        },
      })),
    });
    now = new Date();
    const { events } = validated(validateBatchEnvelope(JSON.parse(body)), true, { now, keyKind: 'secret' });
    const { answers } = await commitGroup(
      sql,
      [{ caller, events, batch: true, requestId: newRequestId(), bytes: body.length }],
      { now, gapDelayMinutes: 30, secretKeyBase: 'bench' },
    );
    const answer = answers[0]!;
    if (!answer.ok) throw answer.error;
    const accepted = answer.body as { attribution: { status: string } }[];
    run.events += accepted.length;
    run.attributed += accepted.filter((a) => a.attribution.status === 'attributed').length;
    run.answerBytes += Buffer.byteLength(jsonArray(accepted));
  }
  return run;
}
