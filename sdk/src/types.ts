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
export type ConversionReport = Schemas['ConversionReport'];
export type ConversionReportParams = operations['getConversionReport']['parameters']['query'];
