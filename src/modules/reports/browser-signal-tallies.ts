import { brandTable, recordset, type WritePart } from '../../db/fast-path/index.js';
import { isoTime } from '../../shared/iso-time.js';
import { browserEventTypes } from '../events/events.schemas.js';

interface SignalRow {
  brand_id: string;
  livemode: boolean;
  type: string;
  /** Milliseconds since 1970. */
  occurred_at: number;
}

const signalTypes = new Set<string>(browserEventTypes);

/** Quarter hours from a fixed UTC origin (browser-signal.entities.ts says why quarter hours). */
export const bucketOf = (column: string) =>
  `date_bin('15 minutes', ${column}, timestamptz '2000-01-01 00:00Z')`;

/** The tally insert, built once: every group commit writes it. Its id is taken from the
 * table's sequence by name: a Citus shard, which the brand's write names there, has no default
 * for it (db/fast-path/brand-shards.ts). */
const signalTallyInsert = `insert into ${brandTable('browser_signal_tallies')} (id, brand_id, livemode, bucket_start, type, count)
          select nextval('browser_signal_tallies_id_seq'), x.brand_id, x.livemode, ${bucketOf('x.occurred_at')}, x.type, count(*)
            from ${recordset({ brand_id: 'text', livemode: 'boolean', type: 'text', occurred_at: 'timestamptz' })}
           group by 2, 3, 4, 5`;

/** The group's browser signals, counted per brand, mode, quarter hour and type, appended as tallies. */
export function browserSignalTallies(received: readonly SignalRow[]): WritePart {
  return {
    sql: signalTallyInsert,
    rows: received
      .filter((e) => signalTypes.has(e.type))
      .map(({ brand_id, livemode, type, occurred_at }) => ({
        brand_id,
        livemode,
        type,
        occurred_at: isoTime(occurred_at),
      })),
  };
}
