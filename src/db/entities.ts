import { RequeuedWork } from '../jobs/requeued-work.entity.js';
import { Click } from '../modules/attribution/click.entity.js';
import { CouponCode } from '../modules/attribution/coupon-code.entity.js';
import { Creator } from '../modules/attribution/creator.entity.js';
import { Offer } from '../modules/attribution/offer.entity.js';
import { TrackingLink } from '../modules/attribution/tracking-link.entity.js';
import { Brand } from '../modules/brands/brand.entity.js';
import { BalanceTally, CreatorBalance } from '../modules/creators/creator-balance.entities.js';
import { IdempotencyRecord } from '../modules/ingestion/idempotency-record.entity.js';
import { ReceivedEvent } from '../modules/ingestion/received-event.entity.js';
import {
  IngestionFailure,
  IntegrationCount,
  IntegrationStatus,
  IntegrationTally,
  MissingOrder,
} from '../modules/integration/integration.entities.js';
import { ApiKey } from '../modules/keys/api-key.entity.js';
import { LedgerMovement } from '../modules/ledger/ledger-movement.entity.js';
import { Order } from '../modules/orders/order.entity.js';
import { Refund } from '../modules/orders/refund.entity.js';
import { Payout } from '../modules/payouts/payout.entity.js';
import { PayoutClawback } from '../modules/payouts/payout-clawback.entity.js';
import { PayoutRun } from '../modules/payouts/payout-run.entity.js';
import { BrowserSignalCount, BrowserSignalTally } from '../modules/reports/browser-signal.entities.js';
import {
  ConversionCount,
  ConversionFineTally,
  ConversionTally,
} from '../modules/reports/conversion.entities.js';
import { WebhookDelivery, WebhookEndpoint, WebhookEvent } from '../modules/webhooks/webhook.entities.js';
import { OutboxMessage } from '../outbox/outbox-message.entity.js';

export const entities = [
  Brand,
  ApiKey,
  Offer,
  Creator,
  CouponCode,
  TrackingLink,
  Click,
  Order,
  Refund,
  LedgerMovement,
  ReceivedEvent,
  IdempotencyRecord,
  Payout,
  PayoutClawback,
  OutboxMessage,
  MissingOrder,
  IngestionFailure,
  IntegrationStatus,
  IntegrationTally,
  IntegrationCount,
  BalanceTally,
  CreatorBalance,
  WebhookEndpoint,
  WebhookEvent,
  WebhookDelivery,
  PayoutRun,
  RequeuedWork,
  BrowserSignalTally,
  BrowserSignalCount,
  ConversionTally,
  ConversionFineTally,
  ConversionCount,
];
