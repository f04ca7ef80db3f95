/** Rows per `JSON.stringify` call: a few kilobytes of text each, for the hot path's rows. */
const ROWS_PER_PIECE = 32;
/** A piece longer than this halves the rows of the next: big rows stay well below the cliff. */
const PIECE_CHARS = 32 * 1024;

/**
 * `JSON.stringify(items)` as UTF-8 bytes, written piece by piece for a long array: V8 writes JSON
 * several times slower per byte once one call's output passes 128 Ki characters, which a batch's
 * rows do (docs/benchmarks.md, "Profile notes"). The bytes are exactly those of
 * `JSON.stringify(items)`; a short array is returned as that string.
 */
export function jsonArray(items: readonly unknown[]): string | Buffer {
  if (items.length <= ROWS_PER_PIECE) return JSON.stringify(items);
  const pieces: string[] = [];
  let bytes = 0;
  let per = ROWS_PER_PIECE;
  for (let i = 0; i < items.length; ) {
    const piece = JSON.stringify(items.slice(i, i + per));
    i += per;
    pieces.push(piece);
    bytes += Buffer.byteLength(piece);
    if (piece.length > PIECE_CHARS && per > 1) per >>= 1;
  }
  // Each piece is `[…]`: the next one writes over the closing bracket, with a comma for its opening one.
  const out = Buffer.allocUnsafe(bytes - (pieces.length - 1));
  let offset = 0;
  for (const [n, piece] of pieces.entries()) {
    const start = offset;
    offset += out.write(piece, offset) - 1;
    if (n > 0) out[start] = 0x2c; // ,
  }
  out[offset] = 0x5d; // ]
  return out;
}
