import type { AttributionDecision } from '../attribution/decision.js';
import type { AttributionCatalog } from '../attribution/resolve.js';
import type { BrandTerms } from '../keys/caller.js';
import type { Journal } from '../ledger/journal.js';
import type { AttributionVia } from '../orders/order.entity.js';
import type { RefundKind } from '../orders/refund.entity.js';
import type { WebhookEmitter } from '../webhooks/emitter.js';
import type { OrderState } from './order-state.js';
import type { ProgramBook } from './program-state.js';

/** A brand and a mode: every order, event and ledger line belongs to exactly one. */
export interface Scope {
  brandId: string;
  livemode: boolean;
}

export const scopeKey = (scope: Scope) => `${scope.brandId}/${scope.livemode ? 'live' : 'test'}`;

export interface OrderOutcome {
  attributedVia: AttributionVia | null;
  conversionId: string | null;
  /** The order's flags after the event (none for browser signals): the event's answer shows them. */
  flags: readonly string[];
  /** order.paid: the attribution decision, stored with its received event. */
  decision?: AttributionDecision;
}

export interface NewRefund {
  id: string;
  brand_id: string;
  livemode: boolean;
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

/** A click first recorded at ingestion: a signed reference's, once an order is attributed by it. */
export interface NewClick {
  id: string;
  brand_id: string;
  creator_id: string;
  offer_id: string;
  link_id: string;
  clicked_at: string;
}

/**
 * What one group commit reads and changes for one brand and mode, in memory: the orders its
 * events name (rows locked), the attribution catalog, and, shared by every book of the group,
 * the journal and new refunds. Events are planned against it one by one, synchronously; a
 * planner validates before it changes anything, so a failing event leaves no trace.
 */
export interface OrderBook {
  scope: Scope;
  terms: BrandTerms;
  now: Date;
  /** By the brand's order_id: loaded orders, then orders created by earlier events. */
  orders: Map<string, OrderState>;
  catalog: AttributionCatalog;
  journal: Journal;
  newRefunds: NewRefund[];
  /** Shared by every book of the group, as `newRefunds`. */
  newClicks: NewClick[];
  /** The scope's webhook events, for its enabled endpoints (loaded with the book); absent: none. */
  webhooks?: WebhookEmitter;
  /** The brand's commission program (program-book.ts); absent: no published version, today's rules. */
  program?: ProgramBook;
}

export const outcomeOf = (o: OrderState): OrderOutcome => ({
  attributedVia: o.attributedVia,
  conversionId: o.conversionId,
  flags: o.flags,
});

/** An event about no order (a browser signal) has no flags; one array for all of them. */
export const NO_FLAGS: readonly string[] = Object.freeze([]);
