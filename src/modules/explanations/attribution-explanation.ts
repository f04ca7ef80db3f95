import type { EntityManager } from '@mikro-orm/postgresql';
import { onCitus } from '../../db/citus.js';
import { AppError } from '../../shared/errors.js';
import type { AttributionDecision } from '../attribution/decision.js';
import { type DecisionRecord, readDecision, type StoredItems } from '../attribution/decision-record.js';
import type { Candidate } from '../attribution/resolve.js';
import type { Scope } from '../ingestion/order-book.js';
import { eventRequestIdSql } from '../ingestion/received-event.entity.js';
import { movementEventIdSql } from '../ledger/ledger-movement.entity.js';
import { conversionIdOf } from '../orders/conversion-id.js';
import { oneOrderWhere } from '../orders/lookup-key.js';
import type { AttributionVia } from '../orders/order.entity.js';
import { commissionOut, commissionSentence } from '../programs/commission-out.js';

interface OrderRow {
  id: string;
  order_id: string;
  status: string;
  attributed_via: string | null;
  creator_id: string | null;
  offer_id: string | null;
  conversion_id: string | null;
  commission_bps: number | null;
  commission_amount: string;
  refunded_commission_amount: string;
  flags: string[] | null;
}

interface EventRow {
  id: string;
  type: string;
  request_id: string;
  occurred_at: Date;
  received_at: Date;
  data: Record<string, unknown>;
  attribution: DecisionRecord | AttributionDecision | null;
}

interface MovementRow {
  event_id: string | null;
  payout_id: string | null;
  /** Set on a payout's movements (an event's reach their request through the event). */
  request_id: string | null;
  kind: string;
  creator_id: string | null;
  amount: string;
  created_at: Date;
}

/** The pricing a commission recalculation gave the order, with the recalculation's request. */
interface RecalculatedRow {
  recalculation_id: string;
  request_id: string;
  commission: NonNullable<AttributionDecision['commission']>;
  created_at: Date;
}

interface RefundRow {
  event_id: string;
  kind: 'refund' | 'cancellation';
  refund_id: string | null;
  amount: string;
  commission_reversed: string;
}

const won = (n: number) => n.toLocaleString('en-US');
const rateSources = {
  offer: "the offer's rate",
  brand_default: "the brand's default rate",
  inherited: 'the rate the order already had',
} as const;
const percent = (bps: number) => `${(bps / 100).toFixed(2)}%`;

function candidateSentence(c: Candidate): string {
  if (c.type === 'coupon_code') {
    return c.found
      ? `Coupon code ${c.code} found: creator ${c.creator_id}${c.offer_id ? `, offer ${c.offer_id}` : ''}.`
      : `Coupon code ${c.code} is not one of the brand's codes.`;
  }
  if (!c.channel_allows) {
    return `Click ${c.click_ref} not considered: last_touch_channel '${c.last_touch_channel}' is not lf, so another channel had the last touch.`;
  }
  if (c.signed && !c.signature_valid)
    return `Click reference ${c.click_ref} was not signed by this service (altered, made up, or signed under a secret since replaced): it attributes nothing.`;
  if (!c.found)
    return c.signed
      ? `Click reference ${c.click_ref} names tracking link ${c.link_id}, which this brand does not have (another brand's link, or one since deleted).`
      : `Click ${c.click_ref} is not a click of this brand.`;
  const days = (c.age_seconds! / 86_400).toFixed(1);
  // Signed at the redirect instead of recorded: the shopper's address had used up its clicks.
  const throttled = c.signed
    ? ', from a throttled address (signed at the redirect, not recorded there),'
    : '';
  return c.within_window
    ? `Click ${c.click_ref} (creator ${c.creator_id})${throttled} happened ${days} days before the order, inside its ${c.window_days}-day window.`
    : `Click ${c.click_ref} (creator ${c.creator_id})${throttled} happened ${days} days before the order, outside its ${c.window_days}-day window.`;
}

/** The decision of one order.paid, in sentences: candidates in order, the winner and why, the arithmetic. */
export function explainDecision(d: AttributionDecision): string[] {
  if (d.effect === 'unchanged') return ['The order was paid out or closed: this resend changed nothing.'];
  const lines = d.candidates.map(candidateSentence);
  if (d.renewal) {
    const r = d.renewal;
    lines.push(
      r.parent_found
        ? `Renewal of ${r.parent_order_id}, cycle ${r.cycle_number}${r.recurring_limit === null ? ' (no recurring limit)' : ` of at most ${r.recurring_limit} with commission`}${r.beyond_limit ? ': past the limit' : ''}.`
        : `Parent order ${r.parent_order_id} is not known: no renewal attribution.`,
    );
  }
  if (!d.result) lines.push('Nothing resolved: the order is unattributed.');
  else if (d.sticky)
    lines.push(`Nothing resolved: the order keeps its attribution by ${d.result.via} (sticky).`);
  else lines.push(`Attributed by ${d.result.via} to creator ${d.result.creator_id}.`);
  if (d.result && d.previous_creator_id && d.previous_creator_id !== d.result.creator_id) {
    lines.push(`Moved from creator ${d.previous_creator_id} to ${d.result.creator_id}.`);
  }
  if (d.self_purchase) lines.push("Self-purchase: the buyer is the creator's own registered customer.");
  const c = d.commission;
  if (c?.program) lines.push(commissionSentence(d)!);
  else if (c) {
    const base = `${percent(c.rate_bps)} (${rateSources[c.rate_source]}) of ${won(c.base_amount)} KRW`;
    lines.push(
      c.zeroed_by
        ? `Commission 0: ${c.zeroed_by === 'self_purchase' ? 'self-purchase' : 'renewal past the recurring limit'} (otherwise ${base}).`
        : `Commission ${won(c.amount)} KRW = ${base}, rounded down to the won.`,
    );
  }
  return lines;
}

/** A decision as the history shows it: the program's pricing is the explanation's `commission`. */
function publicDecision(d: AttributionDecision | null): AttributionDecision | null {
  if (!d?.commission?.program) return d;
  const { program: _, ...commission } = d.commission;
  return { ...d, commission };
}

function refundSentence(r: RefundRow, moves: MovementRow[]): string {
  const what = r.kind === 'cancellation' ? 'Cancellation' : `Refund${r.refund_id ? ` ${r.refund_id}` : ''}`;
  const clawback = moves.some((m) => m.kind === 'clawback');
  return `${what} of ${won(Number(r.amount))} KRW reversed ${won(Number(r.commission_reversed))} KRW commission${clawback ? ' as a clawback, netted in the next payout (the order was already paid out)' : ''}.`;
}

const notFound = (orderId: string, scope: Scope) =>
  new AppError(
    'order_not_found',
    `No order with order_id '${orderId}' was ingested for this brand in ${scope.livemode ? 'live' : 'test'} mode.`,
    {
      param: 'order_id',
      hint: 'Orders sent with a test key are only visible to test keys, and live ones to live keys.',
    },
  );

/**
 * Why an order is (not) attributed, from what was kept when it happened: each order.paid's
 * recorded decision, each refund and cancellation, and every journal movement with its event
 * and request, oldest first. Nothing is recomputed from today's codes, clicks or rates.
 */
export async function explainAttribution(em: EntityManager, scope: Scope, orderId: string) {
  const where = oneOrderWhere('o', scope, orderId, await onCitus(em));
  const [order] = await em.execute<OrderRow[]>(
    `select id, order_id, status, attributed_via, creator_id, offer_id, conversion_id, commission_bps,
            commission_amount, refunded_commission_amount, flags
       from orders o where ${where.sql}`,
    where.params,
  );
  if (!order) throw notFound(orderId, scope);
  const [events, moves, refunds, recalculated] = await Promise.all([
    em.execute<EventRow[]>(
      `select id, type, ${eventRequestIdSql('e')} as request_id, occurred_at, received_at, data, attribution
         from received_events e
        where brand_id = ? and livemode = ? and order_id = ?
          and type in ('order.paid', 'refund.created', 'order.cancelled', 'order.confirmed')
        order by received_at, id`,
      [scope.brandId, scope.livemode, orderId],
    ),
    em.execute<MovementRow[]>(
      `select ${movementEventIdSql('m')} as event_id, m.payout_id, m.request_id, m.kind, m.creator_id, m.amount, m.created_at
         from ledger_movements m
        where m.brand_id = ? and m.order_id = ? order by m.created_at, m.id`,
      [scope.brandId, order.id],
    ),
    em.execute<RefundRow[]>(
      `select event_id, kind, refund_id, amount, commission_reversed from refunds where brand_id = ? and order_id = ?`,
      [scope.brandId, order.id],
    ),
    em.execute<RecalculatedRow[]>(
      `select r.recalculation_id, c.request_id, r.commission, r.created_at
         from commission_recalculated_orders r
         join commission_recalculations c on c.brand_id = r.brand_id and c.id = r.recalculation_id
        where r.brand_id = ? and r.order_id = ?`,
      [scope.brandId, order.id],
    ),
  ]);
  const movementsOf = (eventId: string) => moves.filter((m) => m.event_id === eventId);
  const movement = (m: MovementRow) => ({ kind: m.kind, creator_id: m.creator_id, amount: Number(m.amount) });
  // A program's parts are read with the items the event carried (decision-record.ts).
  const decisionOf = (e: EventRow) =>
    e.attribution ? readDecision(e.attribution, e.data.items as StoredItems) : null;
  // A recalculation's pricing read as a decision of the order's attribution as it is now (the
  // recalculation moves no attribution; its rules name no offer's rate).
  const recalculationDecision = (r: RecalculatedRow): AttributionDecision => ({
    effect: 'applied',
    candidates: [],
    renewal: null,
    sticky: false,
    result: order.creator_id
      ? {
          via: order.attributed_via as AttributionVia,
          creator_id: order.creator_id,
          offer_id: order.offer_id,
        }
      : null,
    previous_creator_id: null,
    self_purchase: r.commission.zeroed_by === 'self_purchase',
    commission: r.commission,
  });
  // Every pricing of the order in the order it was applied: each applied order.paid's decision
  // and each recalculation's. A recalculation's time is taken after it locked the order, so an
  // order.paid applied before it is earlier.
  const pricings = [
    ...events
      .filter((e) => e.type === 'order.paid' && e.attribution)
      .map((e) => ({ at: new Date(e.received_at).getTime(), decision: decisionOf(e) }))
      .filter((p) => p.decision?.effect === 'applied'),
    ...recalculated.map((r) => ({
      at: new Date(r.created_at).getTime(),
      decision: recalculationDecision(r),
    })),
  ].sort((a, b) => a.at - b.at);
  // The order's commission as its last pricing decided it.
  const priced = pricings.at(-1)?.decision;
  const recalculationMovements = (r: RecalculatedRow) =>
    moves.filter((m) => m.event_id === null && m.payout_id === null && m.request_id === r.request_id);
  const eventEntries = events.map((e) => {
    const refund = refunds.find((r) => r.event_id === e.id);
    const own = movementsOf(e.id);
    const explanation =
      e.type === 'order.paid'
        ? e.attribution
          ? explainDecision(decisionOf(e)!)
          : ['This order.paid was received before decisions were recorded; see the movements.']
        : refund
          ? [refundSentence(refund, own)]
          : e.type === 'order.confirmed'
            ? ['Recorded; payout is never moved earlier by order.confirmed.']
            : ['Accepted; the order was already closed, so nothing changed.'];
    return {
      event_id: e.id,
      recalculation_id: null,
      type: e.type,
      request_id: e.request_id,
      occurred_at: new Date(e.occurred_at).toISOString(),
      received_at: new Date(e.received_at).toISOString(),
      decision: publicDecision(decisionOf(e)),
      refund: refund
        ? {
            kind: refund.kind,
            refund_id: refund.refund_id,
            amount: Number(refund.amount),
            commission_reversed: Number(refund.commission_reversed),
          }
        : null,
      movements: own.map(movement),
      explanation,
    };
  });
  const recalculationEntries = recalculated.map((r) => {
    const at = new Date(r.created_at).toISOString();
    const c = r.commission;
    return {
      event_id: null as string | null,
      recalculation_id: r.recalculation_id as string | null,
      type: 'commission.recalculated',
      request_id: r.request_id,
      occurred_at: at,
      received_at: at,
      decision: null,
      refund: null,
      movements: recalculationMovements(r).map(movement),
      explanation: [
        `Recalculation ${r.recalculation_id} pinned the order to commission program version ${c.program?.version_id} and priced it again.`,
        commissionSentence(recalculationDecision(r))!,
      ],
    };
  });
  // Events in the order received, each recalculation where it fell among them.
  const history = [...eventEntries, ...recalculationEntries].sort(
    (a, b) => Date.parse(a.received_at) - Date.parse(b.received_at),
  );
  return {
    object: 'attribution_explanation' as const,
    order_id: order.order_id,
    livemode: scope.livemode,
    current: {
      status: order.status,
      attributed_via: order.attributed_via,
      creator_id: order.creator_id,
      offer_id: order.offer_id,
      conversion_id: conversionIdOf(order),
      commission_bps: order.commission_bps,
      commission_amount: Number(order.commission_amount),
      refunded_commission_amount: Number(order.refunded_commission_amount),
      flags: order.flags ?? [],
    },
    commission: order.attributed_via === null ? null : commissionOut(priced),
    history,
    payouts: moves
      .filter((m) => m.payout_id)
      .map((m) => ({
        payout_id: m.payout_id!,
        request_id: m.request_id!,
        at: new Date(m.created_at).toISOString(),
        ...movement(m),
      })),
  };
}
