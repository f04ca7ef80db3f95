import { describe, expect, it } from 'vitest';
import { writeShapeOf } from '../../src/modules/ingestion/commit-group.js';
import { type GroupWritePart, type GroupWrites, groupWrites } from '../../src/modules/ingestion/write-set.js';

/**
 * Which stored write a group commits with (commit-group.ts `writeShapeOf`): new orders paid that no
 * program priced go by the first shape's unpriced form, whose insert of orders leaves out the pin
 * and the capped amount; a group with one priced new order, or with parts the first shape lacks,
 * does not. Only the two program columns of each row decide (the rows are otherwise never read).
 */
const template = groupWrites([], [], [], []);
const unpriced = { commission_program_version_id: null, commission_capped_amount: null };
const pinned = { commission_program_version_id: 'cpv_1', commission_capped_amount: null };
const capped = { commission_program_version_id: 'cpv_1', commission_capped_amount: 500 };

function writesOf(rows: Partial<Record<GroupWritePart, object[]>>): GroupWrites {
  const writes = { ...template };
  for (const part of Object.keys(template) as GroupWritePart[])
    writes[part] = { ...template[part], rows: rows[part] ?? [] };
  return writes;
}

/** Whether the stored statement the shape commits with (the plain and the one-brand form) writes the pin. */
const writesPin = (writes: GroupWrites) => {
  const texts = writeShapeOf(writes)
    .write.statements.slice(0, 2)
    .map((s) => /\bcommission_program_version_id\b/.test(s.text));
  expect(texts[0]).toBe(texts[1]);
  return texts[0];
};

describe('the write shape of a group', () => {
  const singleNewOrders = { receivedEvents: [{}], movements: [{}], conversionTallies: [{}] };

  it('new orders no program priced: the unpriced form, new orders inserted without the two columns', () => {
    const writes = writesOf({ ...singleNewOrders, newOrders: [unpriced, unpriced] });
    const shape = writeShapeOf(writes);
    expect(writesPin(writes)).toBe(false);
    // The rows it sends: the new orders' part by the insert that names neither column.
    const parts = shape.partsOf!(writes);
    expect(parts).toHaveLength(shape.parts.length);
    const newOrders = parts[shape.parts.indexOf('newOrders')]!;
    expect(newOrders.rows).toEqual([unpriced, unpriced]);
    expect(newOrders.sql).toMatch(/^insert into .*orders/);
    expect(newOrders.sql).not.toMatch(/commission_program_version_id|commission_capped_amount/);
    expect(shape.parts).toEqual(writeShapeOf(writesOf({ ...singleNewOrders, newOrders: [pinned] })).parts);
  });

  it('one new order priced (pinned, capped or not): the full first shape, the columns written', () => {
    for (const priced of [pinned, capped]) {
      const writes = writesOf({ ...singleNewOrders, newOrders: [unpriced, priced] });
      expect(writeShapeOf(writes).partsOf).toBeUndefined();
      expect(writesPin(writes)).toBe(true);
    }
    // The two forms are two stored statements of the same parts.
    const a = writeShapeOf(writesOf({ ...singleNewOrders, newOrders: [unpriced] }));
    const b = writeShapeOf(writesOf({ ...singleNewOrders, newOrders: [pinned] }));
    expect(a.parts).toEqual(b.parts);
    expect(a.write.statements.map((s) => s.name)).not.toEqual(b.write.statements.map((s) => s.name));
  });

  it('unpriced new orders beside a part the first shape lacks: that shape, which has no unpriced form', () => {
    const writes = writesOf({ ...singleNewOrders, newOrders: [unpriced], idempotencyRecords: [{}] });
    expect(writeShapeOf(writes).parts).toContain('idempotencyRecords');
    expect(writeShapeOf(writes).partsOf).toBeUndefined();
    expect(writesPin(writes)).toBe(true);
  });
});
