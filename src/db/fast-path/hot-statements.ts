import { type StoredStatement, storedStatement } from './stored-statements.js';
import { asTransaction, type Sql, type TransactionSettings } from './transaction.js';
import { sendWrites, type WritePart, writeStatementText } from './write-set.js';

/** A hot statement kept planned in the database (stored-statements.ts), run with its values. */
export interface HotQuery {
  /** What `npm run migrate` installs. */
  readonly stored: StoredStatement;
  run<R = Record<string, unknown>>(sql: Sql, values: readonly unknown[]): Promise<R[]>;
}

/** A hot statement of one brand's transaction: on Citus it runs on the brand's worker, on its shards. */
export interface BrandQuery {
  readonly stored: StoredStatement;
  run<R = Record<string, unknown>>(sql: Sql, brandId: string, values: readonly unknown[]): Promise<R[]>;
}

/** `text` (each `?` with its type cast) returning rows of `columns` (`orders json, codes json`). */
export function hotQuery(text: string, columns: string): HotQuery {
  const stored = storedStatement(text, columns);
  return { stored, run: (sql, values) => asTransaction(sql).query(stored, values) };
}

/**
 * `hotQuery` for a statement touching `brandId`'s rows only, which names each of its tables
 * through `brandTable` (brand-shards.ts). `settings` are the function's own: it runs on the
 * brand's worker, which the coordinator transaction's `SET LOCAL` does not reach.
 */
export function brandQuery(text: string, columns: string, settings: TransactionSettings): BrandQuery {
  const stored = storedStatement(text, columns, { brandFirst: true, settings });
  return {
    stored,
    run: (sql, brandId, values) => asTransaction(sql).query(stored, [brandId, ...values]),
  };
}

/** A set-based write of fixed parts (write-set.ts `executeWrites`), kept planned in its forms. */
export interface HotWrite {
  /** Every form's stored statement, for `npm run migrate`. */
  readonly statements: readonly StoredStatement[];
  /**
   * Writes `parts` (the templates' parts, in their order, with rows) and commits. With `brandId`
   * (Citus) the write runs on the brand's worker; otherwise with `copy`, the copied parts go in
   * by COPY ahead of the rest's statement.
   */
  commit(sql: Sql, parts: WritePart[], options?: { brandId?: string; copy?: boolean }): Promise<void>;
}

/**
 * The stored forms of one write: as it is; one brand's (put first, its function distributed by
 * it on Citus); and, with `copied` (some of the templates, in the order they are copied), the
 * rest of them, those sent by COPY ahead. Never a COPY for one brand on Citus: a COPY from the coordinator beside the call on the
 * brand's worker makes the commit two-phase (docs/decisions.md, "Citus").
 */
export function hotWrite(
  templates: readonly WritePart[],
  options: { settings: TransactionSettings; copied?: readonly WritePart[] },
): HotWrite {
  const text = writeStatementText(templates);
  const plain = storedStatement(text, 'ok int');
  const oneBrand = storedStatement(text, 'ok int', { brandFirst: true, settings: options.settings });
  const copiedAt = (options.copied ?? []).map((copied) =>
    templates.findIndex((part) => part.sql === copied.sql),
  );
  if (copiedAt.includes(-1)) throw new Error("a copied part is not among the write's parts");
  const restAt = templates.flatMap((_, i) => (copiedAt.includes(i) ? [] : [i]));
  const rest =
    copiedAt.length > 0
      ? storedStatement(writeStatementText(restAt.map((i) => templates[i]!)), 'ok int')
      : null;
  return {
    statements: [plain, oneBrand, ...(rest ? [rest] : [])],
    commit(sql, parts, { brandId, copy } = {}) {
      if (brandId !== undefined)
        return sendWrites(sql, parts, { commit: true, stored: oneBrand, leading: [brandId] });
      if (copy && rest)
        return sendWrites(
          sql,
          restAt.map((i) => parts[i]!),
          { commit: true, stored: rest, copies: copiedAt.map((i) => parts[i]!) },
        );
      return sendWrites(sql, parts, { commit: true, stored: plain });
    },
  };
}
