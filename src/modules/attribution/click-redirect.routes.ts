import { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { route } from '../../http/route.js';
import { text } from '../../shared/text.js';
import { recordLinkClick } from './attribution.service.js';

export function clickRedirectRoutes({ orm }: AppDeps) {
  return [
    route({
      method: 'get',
      path: '/c/{slug}',
      operationId: 'followTrackingLink',
      summary: 'Tracking redirect',
      description:
        'Records a click, then redirects to the offer’s landing URL with `lf_click=<click_ref>` added.',
      tag: 'Tracking',
      security: 'none',
      params: z.object({ slug: text().max(32) }),
      responses: { 302: { description: 'Redirect to the landing URL; `Location` carries `lf_click`.' } },
      responseHeaders: { 302: ['Location'] },
      errors: ['link_not_found', 'invalid_request_body'],
      async handle(_req, res, { params }) {
        const { clickRef, landingUrl } = await recordLinkClick(orm.em.fork(), params.slug);
        const target = new URL(landingUrl);
        target.searchParams.set('lf_click', clickRef);
        res.setHeader('Cache-Control', 'no-store');
        res.redirect(302, target.toString());
      },
    }),
  ];
}
