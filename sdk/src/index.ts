export {
  BATCH_LIMIT,
  EventsResource,
  IntegrationResource,
  LfClient,
  type LfClientOptions,
  OrdersResource,
  type SendOptions,
} from './client.js';
export {
  LfApiError,
  type LfApiErrorFields,
  LfAuthenticationError,
  LfBatchError,
  LfConnectionError,
  LfError,
  LfInvalidRequestError,
  LfNotFoundError,
  LfPermissionError,
  LfRateLimitError,
  LfServerError,
  LfTimeoutError,
} from './errors.js';
export { type BackoffOptions, parseRetryAfter, type RetryInfo, SDK_VERSION } from './http.js';
export {
  clickRefOf,
  LF_CLICK_COOKIE,
  type LfClickOptions,
  type LfClickRequest,
  type LfClickResponse,
  lfClick,
  parseCookieHeader,
} from './lf-click.js';
export type { components, operations, paths } from './openapi.js';
export type {
  ErrorCode,
  ErrorEnvelope,
  EventIn,
  EventOut,
  EventType,
  IntegrationStatus,
  LfErrorCode,
  ListOrdersParams,
  MissingOrder,
  MissingOrderList,
  MissingOrdersParams,
  Order,
  OrderList,
  Ping,
} from './types.js';
export { verifyWebhook } from './verify-webhook.js';
