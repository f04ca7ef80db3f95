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
    case 'explainOrderAttribution':
      return "const why = await lf.orders.attribution('A-1001');\nconsole.log(why.current.attributed_via, why.history.length);";
    case 'listPayouts':
      return "// A list reads page by page; toArray() reads every page at once.\nconst payouts = await lf.payouts.list({ run_key: '2026-12' }).toArray();\nconsole.log(payouts.map((p) => p.net_amount));";
    case 'getPayout':
      return "const payout = await lf.payouts.get('po_01kb0m3x7d2p9q4r6s8t0v1w2y');\nconsole.log(payout.net_amount);";
    case 'listPayoutLines':
      return "for await (const line of lf.payouts.lines('po_01kb0m3x7d2p9q4r6s8t0v1w2y')) {\n  console.log(line.kind, line.order_id, line.amount);\n}";
    case 'listCreators':
      return 'const creators = await lf.creators.list().toArray();\nconsole.log(creators.map((c) => [c.name, c.balance.payable]));';
    case 'getCreator':
      return "const creator = await lf.creators.get('cr_01kb0k9y2c3d4e5f6g7h8j9k0m');\nconsole.log(creator.name, creator.balance);";
    case 'createReconciliation':
      return "import { createReadStream } from 'node:fs';\nimport { Readable } from 'node:stream';\n\n// Uploads yesterday's books as CSV and waits for the comparison.\nconst reconciliation = await lf.reconciliations.reconcile({\n  from: '2026-11-27T00:00:00+09:00',\n  to: '2026-11-28T00:00:00+09:00',\n  csv: Readable.toWeb(createReadStream('orders-2026-11-27.csv')) as ReadableStream<Uint8Array>,\n});\nconsole.log(reconciliation.status, reconciliation.differences, reconciliation.fixable);";
    case 'listReconciliations':
      return 'for await (const r of lf.reconciliations.list({ limit: 10 })) console.log(r.id, r.status, r.from, r.to);';
    case 'getReconciliation':
      return "const reconciliation = await lf.reconciliations.retrieve('recon_01kb0k9y2c3d4e5f6g7h8j9k0m');\nconsole.log(reconciliation.status, reconciliation.matched, reconciliation.at_stake);";
    case 'listReconciliationDifferences':
      return "for await (const d of lf.reconciliations.differences('recon_01kb0k9y2c3d4e5f6g7h8j9k0m', { fixable: true }))\n  console.log(d.kind, d.order_id, d.reason);";
    case 'getReconciliationResend':
      return "// Each page is a valid batch: sending it applies those fixes, and sending it again changes nothing.\nfor await (const page of lf.reconciliations.resendPages('recon_01kb0k9y2c3d4e5f6g7h8j9k0m'))\n  await lf.events.sendBatch(page.data);";
    case 'getCommissionProgram':
      return 'const program = await lf.commissionProgram.retrieve();\nconsole.log(program.current?.number, program.current?.rules.default_rate_bps, program.next?.effective_from);';
    case 'getConversionReport':
      return "const report = await lf.reports.conversions({\n  from: '2026-11-01T00:00:00+09:00',\n  to: '2026-12-01T00:00:00+09:00',\n  group_by: 'creator',\n});\nconsole.log(report.totals.orders, report.totals.commission);";
    case 'listWebhookEndpoints':
      return 'const endpoints = await lf.webhookEndpoints.list();\nconsole.log(endpoints.map((e) => [e.id, e.status]));';
    case 'createWebhookEndpoint':
      return `const endpoint = await lf.webhookEndpoints.create(${body});\n// Shown only now: store it.\nconsole.log(endpoint.id, endpoint.secret.length);`;
    case 'getWebhookEndpoint':
      return "const endpoint = await lf.webhookEndpoints.get('we_01m85a0k1d7q3v9x2c4h6j8k0m');\nconsole.log(endpoint.status, endpoint.failing_since);";
    case 'updateWebhookEndpoint':
      return "await lf.webhookEndpoints.update('we_01m85a0k1d7q3v9x2c4h6j8k0m', { status: 'enabled' });";
    case 'deleteWebhookEndpoint':
      return "await lf.webhookEndpoints.delete('we_01m85a0k1d7q3v9x2c4h6j8k0m');";
    case 'rollWebhookEndpointSecret':
      return "const rolled = await lf.webhookEndpoints.rollSecret('we_01m85a0k1d7q3v9x2c4h6j8k0m');\nconsole.log(rolled.secret.length);";
    case 'listWebhookDeliveries':
      return "for await (const d of lf.webhookEndpoints.deliveries('we_01m85a0k1d7q3v9x2c4h6j8k0m', { limit: 20 })) {\n  console.log(d.event_type, d.status, d.attempts, d.last_status_code);\n}";
    case 'getWebhookEvent':
      return "const event = await lf.webhookEvents.get('whevt_01kb0m3x7d2p9q4r6s8t0v1w2y');\nconsole.log(event.type, event.data.object);";
    case 'resendWebhookEvent':
      return "const deliveries = await lf.webhookEvents.resend('whevt_01kb0m3x7d2p9q4r6s8t0v1w2y', {\n  endpointId: 'we_01m85a0k1d7q3v9x2c4h6j8k0m',\n});\nconsole.log(deliveries.length);";
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
