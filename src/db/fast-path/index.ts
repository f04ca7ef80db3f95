/**
 * The fast database path, fenced: everything outside src/db/fast-path/ goes through this module
 * (test/unit/fast-path-fence.test.ts refuses an import past it). Domain code opens a transaction,
 * sends its statements, builds the parts of a set-based write, and runs its hot statements by
 * name; how they travel (stored functions, binary arrays, COPY, a brand's shards on Citus) stays
 * inside.
 */
export { brandTable, onPrimaryKeyConflict } from './brand-shards.js';
export { type CopyRows, copyInto, copyRows } from './copy-rows.js';
export {
  type BrandQuery,
  brandQuery,
  type HotQuery,
  type HotWrite,
  hotQuery,
  hotWrite,
} from './hot-statements.js';
export {
  brandShardsProblem,
  installStoredStatements,
  missingStoredStatements,
  type StoredStatement,
} from './stored-statements.js';
export {
  inTransaction,
  inTransactionOn,
  queryOnce,
  type Sql,
  sqlLiteral,
  type TransactionSettings,
  useNamedStatements,
} from './transaction.js';
export { columnRecordset, EPOCH_MS, executeWrites, recordset, type WritePart } from './write-set.js';
