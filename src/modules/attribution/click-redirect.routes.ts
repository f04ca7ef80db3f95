import { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { addressLimitsFor } from '../../http/address-limits.js';
import { clientAddressOf } from '../../http/client-address.js';
import { route } from '../../http/route.js';
import { text } from '../../shared/text.js';
import { followLink } from './attribution.service.js';

export function clickRedirectRoutes(deps: AppDeps) {
  const { orm, config } = deps;
  const limits = addressLimitsFor(deps);
  const clientAddress = clientAddressOf(config.TRUST_PROXY_HOPS);
  return [
    route({
      method: 'get',
      path: '/c/{slug}',
      operationId: 'followTrackingLink',
      summary: 'Tracking redirect',
      description:
        'Records a click, then redirects to the offer’s landing URL with `lf_click=<click_ref>` added. Past its address’s click limit the redirect records nothing: its `lf_click` is a signed reference (`sclk_…`) carrying the link and the time, which attributes an order as a click would.',
      tag: 'Tracking',
      security: 'none',
      params: z.object({ slug: text().max(32) }),
      responses: { 302: { description: 'Redirect to the landing URL; `Location` carries `lf_click`.' } },
      responseHeaders: { 302: ['Location'] },
      errors: ['link_not_found', 'invalid_request_body'],
      async handle(req, res, { params }) {
        // Each recorded click is a row: past its address's limit (a bot, or many shoppers behind
        // one carrier or office address) the click is signed instead, which writes nothing
        // unless an order comes of it.
        const { allowed } = await limits.count('click', clientAddress(req));
        const { clickRef, landingUrl } = await followLink(orm.em.fork(), params.slug, {
          record: allowed,
          secretKeyBase: config.SECRET_KEY_BASE,
        });
        const target = new URL(landingUrl);
        if (clickRef) target.searchParams.set('lf_click', clickRef);
        res.setHeader('Cache-Control', 'no-store');
        res.redirect(302, target.toString());
      },
    }),
  ];
}
