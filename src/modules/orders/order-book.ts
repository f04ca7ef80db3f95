import type { AttributionCatalog } from '../attribution/resolve.js';
import type { Journal } from '../ledger/journal.js';
import type { AttributionVia } from './order.entity.js';
import type { OrderState } from './order-state.js';
import type { RefundKind } from './refund.entity.js';

export interface BrandTerms {
  confirmPeriodDays: number;
  recurringCommissionCycles: number | null;
  defaultCommissionBps: number;
}

export interface OrderOutcome {
  attributedVia: AttributionVia | null;
  conversionId: string | null;
}

export interface NewRefund {
  id: string;
  order_id: string;
  refund_id: string | null;
  kind: RefundKind;
  amount: number;
  original_amount: number;
  commission_reversed: number;
  reason: string | null;
  event_id: string;
  request_id: string;
}

/**
 * Everything one ingestion (one event or one batch) reads and changes, in memory: the
 * orders it names (rows locked), renewal cycle counters, the attribution catalog, the
 * journal and new refunds. Events are planned against it one by one, synchronously;
 * a planner validates before it changes anything, so a failing event leaves no trace.
 */
export interface OrderBook {
  terms: BrandTerms;
  now: Date;
  /** By the brand's order_id: loaded orders, then orders created by earlier events. */
  orders: Map<string, OrderState>;
  catalog: AttributionCatalog;
  journal: Journal;
  newRefunds: NewRefund[];
}

export const outcomeOf = (o: OrderState): OrderOutcome => ({
  attributedVia: o.attributedVia,
  conversionId: o.conversionId,
});
