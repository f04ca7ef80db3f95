import { z } from 'zod';
import type { AppDeps } from '../deps.js';
import { route } from '../http/route.js';
import { isJobName, jobNames } from '../jobs/queues.js';
import { AppError } from '../shared/errors.js';
import { text } from '../shared/text.js';
import { needsRedis } from './needs-redis.js';
import { traceRequest } from './trace.js';

const JobOut = z
  .object({
    id: z.string(),
    object: z.literal('job'),
    name: z.string(),
    queue: z.string(),
    request_id: z.string(),
  })
  .meta({ id: 'Job' });

const TraceOut = z
  .object({
    id: z.string(),
    object: z.literal('trace'),
    request_id: z.string(),
    events: z.array(z.record(z.string(), z.unknown())),
    movements: z.array(z.record(z.string(), z.unknown())),
    outbox: z
      .array(z.record(z.string(), z.unknown()))
      .meta({ description: 'Work the request handed to workers, and when it was relayed to its queue.' }),
    jobs: z.array(z.record(z.string(), z.unknown())),
    webhook_deliveries: z.array(z.record(z.string(), z.unknown())).meta({
      description: 'Deliveries of the webhook events the request caused, or that it asked for (a resend).',
    }),
  })
  .meta({ id: 'Trace' });

export function opsAdminRoutes(deps: AppDeps) {
  return [
    route({
      method: 'post',
      path: '/admin/api/jobs/{job_name}/run',
      operationId: 'adminRunJob',
      summary: 'Run a scheduled job now',
      description: `Enqueues the job for the worker process. Job names: ${jobNames.join(', ')}.`,
      tag: 'Admin: operations',
      security: 'admin',
      params: z.object({ job_name: text().max(60) }),
      responses: { 201: { description: 'The enqueued job.', schema: JobOut } },
      errors: ['invalid_admin_token', 'job_not_found', 'invalid_request_body', 'temporary_service_error'],
      async handle(req, res, { params }) {
        const name = params.job_name;
        if (!isJobName(name)) {
          throw new AppError('job_not_found', `There is no job named '${name}'.`, {
            hint: `Job names: ${jobNames.join(', ')}.`,
          });
        }
        const job = await needsRedis(
          deps.redis,
          () => deps.queues[name].add(name, { request_id: req.requestId, triggered_by: 'admin' }),
          `the job may still have been enqueued: GET /admin/api/trace/${req.requestId} lists it if so`,
        );
        res.status(201).json({
          id: job.id!,
          object: 'job',
          name,
          queue: name,
          request_id: req.requestId,
        } satisfies z.input<typeof JobOut>);
      },
    }),
    route({
      method: 'get',
      path: '/admin/api/trace/{request_id}',
      operationId: 'adminTraceRequest',
      summary: 'Everything recorded under one request_id',
      description: 'The events, order journal movements and jobs of one request, for support.',
      tag: 'Admin: operations',
      security: 'admin',
      params: z.object({ request_id: text().max(40) }),
      responses: {
        200: { description: 'The trace (empty lists when nothing was recorded).', schema: TraceOut },
      },
      errors: ['invalid_admin_token', 'invalid_request_body', 'temporary_service_error'],
      async handle(_req, res, { params }) {
        res.json(await traceRequest(deps, params.request_id));
      },
    }),
  ];
}
