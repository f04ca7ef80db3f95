import type { AnyRoute, Security } from '../http/route.js';

/** A Redoc `x-codeSamples` entry: shown in /docs beside each operation, with a copy button. */
export interface CodeSample {
  lang: string;
  label: string;
  source: string;
}

/** Where each kind of credential comes from in a shell; the README's quickstart exports these. */
const authHeader: Record<Security, string | undefined> = {
  api_key: 'Authorization: Bearer $LF_SECRET_KEY',
  secret_key: 'Authorization: Bearer $LF_SECRET_KEY',
  admin: 'Authorization: Bearer $ADMIN_TOKEN',
  login_jwt: 'Authorization: Bearer $LOGIN_JWT',
  none: undefined,
};

/** `{order_id}` → `$ORDER_ID`: a shell variable, since curl would glob the braces. */
function shellPath(path: string): string {
  return path.replace(/\{([a-z_]+)\}/g, (_, name: string) => `$${name.toUpperCase()}`);
}

function curl(def: AnyRoute, baseUrl: string): string {
  // Key issuance lives on the auth host, not the API host.
  const host = def.security === 'login_jwt' ? '$LF_AUTH_URL' : baseUrl;
  const lines = [
    `curl${def.method === 'get' ? '' : ` -X ${def.method.toUpperCase()}`} "${host}${shellPath(def.path)}"`,
  ];
  const auth = authHeader[def.security];
  if (auth) lines.push(`-H "${auth}"`);
  if (def.body && def.bodyExample !== undefined) {
    lines.push('-H "Content-Type: application/json"');
    if (def.headers?.shape['Idempotency-Key']) lines.push('-H "Idempotency-Key: $(uuidgen)"');
    // JSON examples hold no single quote, so one pair of them quotes the body for the shell.
    lines.push(`-d '${JSON.stringify(def.bodyExample)}'`);
  }
  return lines.join(' \\\n  ');
}

const sdkSetup = `import { LfClient } from '@lf/sdk';

const lf = new LfClient({ apiKey: process.env.LF_SECRET_KEY! });
`;

/**
 * What each operation the SDK covers looks like with it; test/sdk/ compiles every one against
 * the SDK's types, so a sample that stops matching the SDK fails the build.
 */
function sdkCalls(def: AnyRoute): string | undefined {
  const body = def.bodyExample === undefined ? undefined : JSON.stringify(def.bodyExample, null, 2);
  switch (def.operationId) {
    case 'ping':
      return 'const ping = await lf.ping();\nconsole.log(ping.brand, ping.livemode);';
    case 'sendEvent':
      return `// The SDK sends an Idempotency-Key and reuses it on retries.\nconst event = await lf.events.send(${body});\nconsole.log(event.attribution.status, event.request_id);`;
    case 'sendEventBatch':
      return `// Yesterday's paid orders from your own books; resending is safe (order.paid is idempotent).\nconst orders = [\n  { id: 'A-1001', amount: 39000 },\n  { id: 'A-1002', amount: 12900 },\n];\n// Split into requests of 500; a failed event is reported with its index.\nconst events = await lf.events.sendBatch(orders.map((o) => ({\n  type: 'order.paid' as const,\n  data: { order_id: o.id, amount: o.amount },\n})));\nconsole.log(events.length);`;
    case 'getOrder':
      return "const order = await lf.orders.get('A-1001');\nconsole.log(order.status, order.commission_amount);";
    case 'listOrders':
      return 'for await (const order of lf.orders.list({ limit: 100 })) {\n  console.log(order.order_id, order.amount, order.commission_amount);\n}';
    case 'getIntegrationStatus':
      return 'const status = await lf.integration.status();\nconsole.log(status.orders_24h, status.consecutive_failures);';
    case 'listMissingOrders':
      return 'const missing = await lf.integration.missingOrders();\nconsole.log(missing.data.length);';
    default:
      return undefined;
  }
}

export function codeSamples(def: AnyRoute, baseUrl: string): CodeSample[] {
  const samples: CodeSample[] = [{ lang: 'Shell', label: 'curl', source: curl(def, baseUrl) }];
  const calls = sdkCalls(def);
  if (calls) samples.push({ lang: 'TypeScript', label: 'Node SDK', source: `${sdkSetup}\n${calls}\n` });
  return samples;
}
