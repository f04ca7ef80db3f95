/**
 * The conversion id of an order attributed when it was created: its own id's ('conv_' and the
 * order id's body), stored as null (32 bytes less per order). An order attributed later, or
 * again after losing its attribution, gets a new id, stored: no conversion id is ever used twice.
 */
export const derivedConversionId = (orderPk: string) => `conv_${orderPk.slice(4)}`;

/** Whether `conversionId` is `derivedConversionId(orderPk)`, told without spelling that id again. */
export const isDerivedConversionId = (conversionId: string | null, orderPk: string) =>
  conversionId !== null &&
  conversionId.length === orderPk.length + 1 &&
  conversionId.startsWith('conv_') &&
  conversionId.endsWith(orderPk.slice(4));

/** An order row's conversion id: stored, or given by its id while it is attributed. */
export const conversionIdOf = (row: {
  id: string;
  creator_id: string | null;
  conversion_id: string | null;
}) => row.conversion_id ?? (row.creator_id === null ? null : derivedConversionId(row.id));
