import { Migration } from '@mikro-orm/migrations';

const hashIndexes = ['orders_lookup_key_unique', 'received_events_order_index'];

/**
 * Issue 22: the two hash indexes (an order's lookup key, events by order) split a bucket only
 * when it is full (fillfactor 100, not 75): about 10 bytes less per entry, and a quarter fewer
 * bucket splits, each of which writes a full page image to the WAL. A hash index keeps its fill
 * target in its metapage, set when it is built: each is rebuilt once, under a lock that holds
 * writes to its table (timed on 1,000,000 orders in docs/benchmarks.md).
 */
export class Migration20261126030000 extends Migration {
  override name = 'Migration20261126030000';

  override async up(): Promise<void> {
    for (const index of hashIndexes) {
      this.addSql(`alter index "${index}" set (fillfactor = 100);`);
      this.addSql(`reindex index "${index}";`);
    }
  }

  override async down(): Promise<void> {
    for (const index of hashIndexes) {
      this.addSql(`alter index "${index}" reset (fillfactor);`);
      this.addSql(`reindex index "${index}";`);
    }
  }
}
