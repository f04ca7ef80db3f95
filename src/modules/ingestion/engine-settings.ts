/**
 * The engine's transactions plan with sequential scans off: with load-book.ts's single-index
 * probes and write-set.ts's upserts by key, the only plans left are index probes on unique keys,
 * whatever the statistics say (docs/decisions.md). Set per transaction (SET LOCAL), so it holds
 * behind a transaction pooler and leaks to nothing. On Citus a brand's statements carry the same
 * setting themselves (db/fast-path/stored-statements.ts `storedStatement`): they run on its worker.
 */
export const ENGINE_TRANSACTION_SETTINGS = { enable_seqscan: 'off' } as const;
