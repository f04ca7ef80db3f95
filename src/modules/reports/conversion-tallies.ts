import { brandTable, recordset, type WritePart } from '../../db/fast-path/index.js';
import type { ConversionFact } from './conversion-facts.js';

export interface ScopedFact extends ConversionFact {
  brandId: string;
  livemode: boolean;
}

/** The tally insert, built once: every group commit writes it. Its id is taken from the
 * table's sequence by name: a Citus shard, which the brand's write names there, has no default
 * for it (db/fast-path/brand-shards.ts). */
const conversionTallyInsert = `insert into ${brandTable('conversion_tallies')} (id, brand_id, livemode, bucket_start, creator_id, sku, orders, heads,
                                          amount, commission, refunded_amount, reversed_commission)
          select nextval('conversion_tallies_id_seq'), x.brand_id, x.livemode, x.bucket, x.creator, x.sku, x.orders, x.heads,
                 x.amount, x.commission, x.refunded, x.reversed
            from ${recordset({
              brand_id: 'text',
              livemode: 'boolean',
              bucket: 'timestamptz',
              creator: 'text',
              sku: 'text',
              orders: 'int',
              heads: 'int',
              amount: 'bigint',
              commission: 'bigint',
              refunded: 'bigint',
              reversed: 'bigint',
            })}`;

/** A group commit's report changes, appended as tallies (one row per brand, mode, bucket, creator and SKU). */
export function conversionTallies(facts: readonly ScopedFact[]): WritePart {
  return {
    sql: conversionTallyInsert,
    rows: facts.map(({ brandId, livemode, ...f }) => ({ brand_id: brandId, livemode, ...f })),
  };
}
