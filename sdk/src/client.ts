import { randomUUID } from 'node:crypto';
import { LfApiError, LfBatchError, LfError, LfRateLimitError } from './errors.js';
import { type BackoffOptions, type RequestSpec, type RetryInfo, Transport } from './http.js';
import { byCursor, type PagedList } from './paged-list.js';
import { ReconciliationsResource } from './reconciliations.js';
import type {
  AttributionExplanation,
  CommissionProgram,
  ConversionReport,
  ConversionReportParams,
  Creator,
  CreatorList,
  EventIn,
  EventOut,
  IntegrationStatus,
  ListOrdersParams,
  ListPayoutsParams,
  MissingOrderList,
  MissingOrdersParams,
  Order,
  OrderList,
  Payout,
  PayoutLine,
  PayoutLineList,
  PayoutList,
  Ping,
} from './types.js';
import { WebhookEndpointsResource, WebhookEventsResource } from './webhooks.js';

export interface LfClientOptions {
  /** A secret key (`sk_live_…` / `sk_test_…`); publishable keys can only send browser signals. */
  apiKey: string;
  /** Default `http://127.0.0.1:3000`. */
  baseUrl?: string;
  /** Per attempt, until the whole answer is read. Default 10 000. */
  timeoutMs?: number;
  /** Retries after the first attempt, for retryable errors only. Default 3. */
  maxRetries?: number;
  /** Default: the global fetch. */
  fetch?: typeof fetch;
  /** Default `{ baseMs: 250, capMs: 8000 }`. */
  backoff?: BackoffOptions;
  /** A `Retry-After` longer than this is not waited for: the error is thrown at once. Default 60 000. */
  maxRetryAfterMs?: number;
  /** Called before each retry, e.g. to log it. */
  onRetry?: (info: RetryInfo) => void;
}

export interface SendOptions {
  /**
   * Reused on every retry of this call. Default: a new random UUID per call. `sendBatch`
   * derives one key per request from it (`<key>:<from>-<to>`, the event indexes the request
   * carries), since each request has a different body.
   */
  idempotencyKey?: string;
  /** Validate, attribute and plan as a real send, write nothing (`?dry_run=true`). */
  dryRun?: boolean;
}

/** Events per `POST /v1/events/batch` (api-v1.md "Limits"). */
export const BATCH_LIMIT = 500;
const IDEMPOTENCY_KEY_MAX = 255;

const dryRunQuery = (options: SendOptions) => (options.dryRun ? { dry_run: 'true' } : undefined);

/** The global index a batch error's `param` (`events[i]…`) names, when it lies in the request. */
function failedIndex(error: LfError, from: number, to: number): number | undefined {
  if (!(error instanceof LfApiError) || error.param === undefined) return undefined;
  const match = /^events\[(\d+)\]/.exec(error.param);
  if (!match) return undefined;
  const index = from + Number(match[1]);
  return index < to ? index : undefined;
}

/** A batch answer, checked to hold one EventOut per event sent. */
function outsFor(outs: EventOut[], from: number, to: number): EventOut[] {
  if (!Array.isArray(outs) || outs.length !== to - from) {
    throw new LfError(
      `The answer for events[${from}..${to - 1}] holds ${Array.isArray(outs) ? outs.length : 'no'} results instead of ${to - from}.`,
    );
  }
  return outs;
}

export class EventsResource {
  constructor(private readonly transport: Transport) {}

  /** `POST /v1/events`: one event. */
  send(event: EventIn, options: SendOptions = {}): Promise<EventOut> {
    return this.transport.request<EventOut>({
      method: 'POST',
      path: '/v1/events',
      query: dryRunQuery(options),
      body: event,
      idempotencyKey: options.idempotencyKey ?? randomUUID(),
    });
  }

  /**
   * Sends any number of events in order, 500 per request, and returns one EventOut per event.
   *
   * A request refused because it holds more events than the brand's rate-limit bucket
   * (`RateLimit-Limit`) is split into requests of that size. A request that fails with a
   * retryable error is retried (same body, same key). When the error
   * names `events[i]`, the events before it were applied (api-v1.md): the SDK gets their
   * EventOuts back by resending just them (safe: resends are idempotent) and carries on from
   * `i`, retrying only if the error is retryable. Otherwise it throws an LfBatchError with the
   * failing index, the EventOuts of the events applied before it and the error.
   */
  async sendBatch(events: readonly EventIn[], options: SendOptions = {}): Promise<EventOut[]> {
    const base = options.idempotencyKey ?? randomUUID();
    const longest = `${base}:${events.length}-${events.length}`.length;
    if (longest > IDEMPOTENCY_KEY_MAX) {
      throw new TypeError(
        `idempotencyKey is too long for a batch of ${events.length}: the keys derived from it must stay within ${IDEMPOTENCY_KEY_MAX} characters.`,
      );
    }
    const applied: EventOut[] = [];
    let size = BATCH_LIMIT;
    let attempt = 0;
    let from = 0;
    while (from < events.length) {
      const end = Math.min(from + size, events.length);
      const spec = this.batchRequest(events, from, end, base, options);
      let error: LfError;
      try {
        applied.push(...outsFor(await this.transport.once<EventOut[]>(spec), from, end));
        from = end;
        attempt = 0;
        continue;
      } catch (err) {
        if (!(err instanceof LfError)) throw err;
        error = err;
      }
      // A request larger than the brand's whole bucket can never pass (429, nothing applied):
      // send requests of the bucket's size instead.
      const limit = error instanceof LfRateLimitError ? error.rateLimitLimit : undefined;
      if (limit !== undefined && limit < end - from) {
        size = limit;
        continue;
      }
      const failed = failedIndex(error, from, end);
      if (failed !== undefined && failed > from) {
        try {
          applied.push(...(await this.resendApplied(events, from, failed, base, options)));
        } catch {
          throw new LfBatchError(failed, applied, error);
        }
        from = failed;
      }
      try {
        await this.transport.backoff(spec, error, attempt++);
      } catch {
        throw new LfBatchError(from, applied, error);
      }
    }
    return applied;
  }

  private batchRequest(
    events: readonly EventIn[],
    from: number,
    to: number,
    base: string,
    options: SendOptions,
  ): RequestSpec {
    return {
      method: 'POST',
      path: '/v1/events/batch',
      query: dryRunQuery(options),
      body: { events: events.slice(from, to) },
      idempotencyKey: `${base}:${from}-${to}`,
    };
  }

  /** The EventOuts of events[from, to), which a failed request applied without returning them. */
  private async resendApplied(
    events: readonly EventIn[],
    from: number,
    to: number,
    base: string,
    options: SendOptions,
  ): Promise<EventOut[]> {
    return outsFor(
      await this.transport.request<EventOut[]>(this.batchRequest(events, from, to, base, options)),
      from,
      to,
    );
  }
}

export class OrdersResource {
  constructor(private readonly transport: Transport) {}

  /** `GET /v1/orders/{order_id}`; an unknown order throws LfNotFoundError (`order_not_found`). */
  get(orderId: string): Promise<Order> {
    return this.transport.request<Order>({
      method: 'GET',
      path: `/v1/orders/${encodeURIComponent(orderId)}`,
    });
  }

  /** `GET /v1/orders/{order_id}/attribution`: why the order is attributed (or not), event by event. */
  attribution(orderId: string): Promise<AttributionExplanation> {
    return this.transport.request<AttributionExplanation>({
      method: 'GET',
      path: `/v1/orders/${encodeURIComponent(orderId)}/attribution`,
    });
  }

  /** One page of `GET /v1/orders`; pass the previous page's `next_cursor` as `cursor`. */
  listPage(params: ListOrdersParams & { cursor?: string | null } = {}): Promise<OrderList> {
    return this.transport.request<OrderList>({ method: 'GET', path: '/v1/orders', query: params });
  }

  /** Every order matching the filters, oldest first, fetching pages of `limit` as it goes. */
  list(params: ListOrdersParams = {}): PagedList<Order> {
    return byCursor((cursor) => this.listPage({ ...params, cursor }));
  }
}

export class PayoutsResource {
  constructor(private readonly transport: Transport) {}

  /** `GET /v1/payouts/{payout_id}`: what a `payout.created` webhook names; unknown: LfNotFoundError. */
  get(payoutId: string): Promise<Payout> {
    return this.transport.request<Payout>({
      method: 'GET',
      path: `/v1/payouts/${encodeURIComponent(payoutId)}`,
    });
  }

  /** One page of `GET /v1/payouts`. */
  listPage(params: ListPayoutsParams & { cursor?: string | null } = {}): Promise<PayoutList> {
    return this.transport.request<PayoutList>({ method: 'GET', path: '/v1/payouts', query: params });
  }

  /** Every payout matching the filters (creator_id, run_key), oldest first. */
  list(params: ListPayoutsParams = {}): PagedList<Payout> {
    return byCursor((cursor) => this.listPage({ ...params, cursor }));
  }

  /** Every order and clawback the payout settled; their amounts sum to its `net_amount`. */
  lines(payoutId: string, params: { limit?: number } = {}): PagedList<PayoutLine> {
    return byCursor((cursor) =>
      this.transport.request<PayoutLineList>({
        method: 'GET',
        path: `/v1/payouts/${encodeURIComponent(payoutId)}/lines`,
        query: { ...params, cursor },
      }),
    );
  }
}

export class CreatorsResource {
  constructor(private readonly transport: Transport) {}

  /** `GET /v1/creators/{creator_id}`: codes and balance (pending, payable, paid out, clawbacks). */
  get(creatorId: string): Promise<Creator> {
    return this.transport.request<Creator>({
      method: 'GET',
      path: `/v1/creators/${encodeURIComponent(creatorId)}`,
    });
  }

  /** Every creator of the brand, in creation order, with its balance. */
  list(params: { limit?: number } = {}): PagedList<Creator> {
    return byCursor((cursor) =>
      this.transport.request<CreatorList>({
        method: 'GET',
        path: '/v1/creators',
        query: { ...params, cursor },
      }),
    );
  }
}

export class CommissionProgramResource {
  constructor(private readonly transport: Transport) {}

  /** `GET /v1/commission_program`: the published version in force now (`current`) and the next one. */
  retrieve(): Promise<CommissionProgram> {
    return this.transport.request<CommissionProgram>({ method: 'GET', path: '/v1/commission_program' });
  }
}

export class ReportsResource {
  constructor(private readonly transport: Transport) {}

  /** `GET /v1/reports/conversions`: per creator, day (in `time_zone`) or product, at most 366 days. */
  conversions(params: ConversionReportParams): Promise<ConversionReport> {
    return this.transport.request<ConversionReport>({
      method: 'GET',
      path: '/v1/reports/conversions',
      query: params,
    });
  }
}

export class IntegrationResource {
  constructor(private readonly transport: Transport) {}

  /** `GET /v1/integration/status`: the last 24 hours of the key's mode. */
  status(): Promise<IntegrationStatus> {
    return this.transport.request<IntegrationStatus>({ method: 'GET', path: '/v1/integration/status' });
  }

  /** `GET /v1/integration/missing_orders`: orders the browser saw that the server never sent. */
  missingOrders(params: MissingOrdersParams = {}): Promise<MissingOrderList> {
    return this.transport.request<MissingOrderList>({
      method: 'GET',
      path: '/v1/integration/missing_orders',
      query: params,
    });
  }
}

/** The conversion-tracking API's client, with its retry and idempotency rules built in. */
export class LfClient {
  readonly events: EventsResource;
  readonly orders: OrdersResource;
  readonly integration: IntegrationResource;
  readonly payouts: PayoutsResource;
  readonly creators: CreatorsResource;
  readonly commissionProgram: CommissionProgramResource;
  readonly reconciliations: ReconciliationsResource;
  readonly reports: ReportsResource;
  readonly webhookEndpoints: WebhookEndpointsResource;
  readonly webhookEvents: WebhookEventsResource;
  private readonly transport: Transport;

  constructor(options: LfClientOptions) {
    if (typeof options?.apiKey !== 'string' || options.apiKey === '') {
      throw new TypeError('LfClient needs an apiKey (sk_live_… or sk_test_…).');
    }
    const fetchImpl = options.fetch ?? globalThis.fetch;
    if (typeof fetchImpl !== 'function') {
      throw new TypeError('No fetch: use Node 18 or later, or pass the fetch option.');
    }
    this.transport = new Transport({
      apiKey: options.apiKey,
      baseUrl: (options.baseUrl ?? 'http://127.0.0.1:3000').replace(/\/+$/, ''),
      timeoutMs: options.timeoutMs ?? 10_000,
      maxRetries: Math.max(0, options.maxRetries ?? 3),
      fetch: (input, init) => fetchImpl(input, init),
      backoff: { baseMs: options.backoff?.baseMs ?? 250, capMs: options.backoff?.capMs ?? 8_000 },
      maxRetryAfterMs: options.maxRetryAfterMs ?? 60_000,
      onRetry: options.onRetry,
    });
    this.events = new EventsResource(this.transport);
    this.orders = new OrdersResource(this.transport);
    this.integration = new IntegrationResource(this.transport);
    this.payouts = new PayoutsResource(this.transport);
    this.creators = new CreatorsResource(this.transport);
    this.commissionProgram = new CommissionProgramResource(this.transport);
    this.reconciliations = new ReconciliationsResource(this.transport);
    this.reports = new ReportsResource(this.transport);
    this.webhookEndpoints = new WebhookEndpointsResource(this.transport);
    this.webhookEvents = new WebhookEventsResource(this.transport);
  }

  /** `GET /v1/ping`: whether the key works, its brand and its mode. */
  ping(): Promise<Ping> {
    return this.transport.request<Ping>({ method: 'GET', path: '/v1/ping' });
  }
}
