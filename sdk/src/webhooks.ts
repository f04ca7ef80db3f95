import type { Transport } from './http.js';
import { byStartingAfter, type PagedList } from './paged-list.js';
import type {
  ListWebhookDeliveriesParams,
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookEndpoint,
  WebhookEndpointCreate,
  WebhookEndpointDeleted,
  WebhookEndpointList,
  WebhookEndpointPatch,
  WebhookEndpointWithSecret,
  WebhookEvent,
} from './types.js';

const endpointPath = (id: string) => `/v1/webhook_endpoints/${encodeURIComponent(id)}`;

/**
 * `/v1/webhook_endpoints`: where the brand's events are POSTed, in the key's mode. Creating one,
 * rolling its secret and deleting it are retried only on a 429: after a timeout or a 5xx the
 * first attempt may have been applied, so the error is thrown and `list()` tells.
 */
export class WebhookEndpointsResource {
  constructor(private readonly transport: Transport) {}

  /** A new endpoint with its signing secret (`whsec_…`), shown only in this answer: store it now. */
  create(endpoint: WebhookEndpointCreate): Promise<WebhookEndpointWithSecret> {
    return this.transport.request({
      method: 'POST',
      path: '/v1/webhook_endpoints',
      body: endpoint,
      retryOnlyRateLimited: true,
    });
  }

  /** Every endpoint of the key's brand and mode, oldest first (at most 16: one answer). */
  async list(): Promise<WebhookEndpoint[]> {
    return (
      await this.transport.request<WebhookEndpointList>({ method: 'GET', path: '/v1/webhook_endpoints' })
    ).data;
  }

  /** Unknown: LfNotFoundError `webhook_endpoint_not_found`. */
  get(endpointId: string): Promise<WebhookEndpoint> {
    return this.transport.request({ method: 'GET', path: endpointPath(endpointId) });
  }

  /** `{ status: 'enabled' }` re-enables an endpoint disabled after 3 days of failures. */
  update(endpointId: string, patch: WebhookEndpointPatch): Promise<WebhookEndpoint> {
    return this.transport.request({ method: 'PATCH', path: endpointPath(endpointId), body: patch });
  }

  /** Nothing more is sent to it, queued retries included; its delivery history goes with it. */
  delete(endpointId: string): Promise<WebhookEndpointDeleted> {
    return this.transport.request({
      method: 'DELETE',
      path: endpointPath(endpointId),
      retryOnlyRateLimited: true,
    });
  }

  /** A new secret, shown this once; for 24 hours deliveries are signed with both. */
  rollSecret(endpointId: string): Promise<WebhookEndpointWithSecret> {
    return this.transport.request({
      method: 'POST',
      path: `${endpointPath(endpointId)}/roll_secret`,
      retryOnlyRateLimited: true,
    });
  }

  /** Every delivery to the endpoint, latest first: status, attempts, the last answer, the next retry. */
  deliveries(endpointId: string, params: ListWebhookDeliveriesParams = {}): PagedList<WebhookDelivery> {
    return byStartingAfter((startingAfter) =>
      this.transport.request<WebhookDeliveryList>({
        method: 'GET',
        path: `${endpointPath(endpointId)}/deliveries`,
        query: { ...params, starting_after: startingAfter },
      }),
    );
  }
}

/** `/v1/webhook_events`: an event as delivered, and sending it again. */
export class WebhookEventsResource {
  constructor(private readonly transport: Transport) {}

  /** The event exactly as delivered (`whevt_…`); unknown: LfNotFoundError `webhook_event_not_found`. */
  get(eventId: string): Promise<WebhookEvent> {
    return this.transport.request({
      method: 'GET',
      path: `/v1/webhook_events/${encodeURIComponent(eventId)}`,
    });
  }

  /**
   * New deliveries of the same event (same `id`): to `endpointId`, or to every enabled endpoint it
   * went to. Answers the deliveries, pending. Retried only on a 429, like `create`.
   */
  async resend(eventId: string, options: { endpointId?: string } = {}): Promise<WebhookDelivery[]> {
    const answer = await this.transport.request<WebhookDeliveryList>({
      method: 'POST',
      path: `/v1/webhook_events/${encodeURIComponent(eventId)}/resend`,
      body: options.endpointId === undefined ? {} : { endpoint_id: options.endpointId },
      retryOnlyRateLimited: true,
    });
    return answer.data;
  }
}
