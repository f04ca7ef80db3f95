import type { components, operations } from './openapi.js';

type Schemas = components['schemas'];

/** One event as sent: `type` selects its schema and the `data` fields it requires. */
export type EventIn = Schemas['EventIn'];
/** The event types the API accepts. */
export type EventType = EventIn['type'];
/** The service's answer to one applied event. */
export type EventOut = Schemas['EventOut'];
/** The service's recognised state of an order. */
export type Order = Schemas['Order'];
/** One page of `GET /v1/orders`. */
export type OrderList = Schemas['OrderList'];
export type Ping = Schemas['Ping'];
export type IntegrationStatus = Schemas['IntegrationStatus'];
export type MissingOrderList = Schemas['MissingOrderList'];
export type MissingOrder = Schemas['MissingOrder'];
export type ErrorEnvelope = Schemas['ErrorEnvelope'];
/** Every error code the API defines (`http_<status>` codes aside). */
export type ErrorCode = Schemas['ErrorCode'];
/** An error code: one the API defines, or `http_<status>` from routing layers and proxies. */
export type LfErrorCode = ErrorCode | `http_${number}`;

/** Filters of `GET /v1/orders`; the SDK follows `next_cursor` itself. */
export type ListOrdersParams = Omit<NonNullable<operations['listOrders']['parameters']['query']>, 'cursor'>;
export type MissingOrdersParams = NonNullable<operations['listMissingOrders']['parameters']['query']>;

/** A payout: one creator, one run (live mode only). */
export type Payout = Schemas['Payout'];
export type PayoutList = Schemas['PayoutList'];
/** An order a payout paid, or a clawback it netted. */
export type PayoutLine = Schemas['PayoutLine'];
export type PayoutLineList = Schemas['PayoutLineList'];
export type ListPayoutsParams = Omit<NonNullable<operations['listPayouts']['parameters']['query']>, 'cursor'>;
/** A creator with its codes and commission balance in the key's mode. */
export type Creator = Schemas['Creator'];
export type CreatorList = Schemas['CreatorList'];
/** The commission program in force now and the next one scheduled (published versions only). */
export type CommissionProgram = Schemas['CommissionProgram'];
/** One published version of a commission program: its rules, time zone and effective instant. */
export type CommissionProgramVersion = Schemas['CommissionProgramVersion'];
export type ConversionReport = Schemas['ConversionReport'];
/** A comparison of the brand's books for a period with our orders (`recon_…`). */
export type Reconciliation = Schemas['Reconciliation'];
export type ReconciliationList = Schemas['ReconciliationList'];
/** One brand row of a JSON upload (`POST /v1/reconciliations`): `currency` (KRW) and `refunded_amount` (0) may be left out. */
export type ReconciliationRow = Omit<Schemas['ReconciliationRow'], 'currency' | 'refunded_amount'> &
  Partial<Pick<Schemas['ReconciliationRow'], 'currency' | 'refunded_amount'>>;
export type ReconciliationDifference = Schemas['ReconciliationDifference'];
export type ReconciliationDifferenceList = Schemas['ReconciliationDifferenceList'];
/** A page of the events that fix the fixable differences: its `data` is a valid batch. */
export type ReconciliationResendPage = Schemas['ReconciliationResendPage'];
export type ReconciliationDifferencesParams = NonNullable<
  operations['listReconciliationDifferences']['parameters']['query']
>;
export type ConversionReportParams = operations['getConversionReport']['parameters']['query'];
/** Why an order is (or is not) attributed: every event that decided it, with its candidates. */
export type AttributionExplanation = Schemas['AttributionExplanation'];

/** A webhook endpoint of the key's brand and mode. */
export type WebhookEndpoint = Schemas['WebhookEndpoint'];
/** An endpoint as created or after a secret roll: with its signing secret, shown this once. */
export type WebhookEndpointWithSecret = Schemas['WebhookEndpointWithSecret'];
export type WebhookEndpointCreate = Schemas['WebhookEndpointCreate'];
export type WebhookEndpointPatch = Schemas['WebhookEndpointPatch'];
export type WebhookEndpointList = Schemas['WebhookEndpointList'];
export type WebhookEndpointDeleted = Schemas['WebhookEndpointDeleted'];
/** One event sent (or resent) to one endpoint: status, attempts, the last answer. */
export type WebhookDelivery = Schemas['WebhookDelivery'];
export type WebhookDeliveryList = Schemas['WebhookDeliveryList'];
export type ListWebhookDeliveriesParams = Omit<
  NonNullable<operations['listWebhookDeliveries']['parameters']['query']>,
  'starting_after'
>;
/** A webhook event as delivered (and as `verifyWebhook` guards): switch on `type` for its `data.object`. */
export type WebhookEvent = Schemas['WebhookEvent'];
export type WebhookEventType = WebhookEvent['type'];
