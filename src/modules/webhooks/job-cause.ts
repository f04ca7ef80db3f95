import { AsyncLocalStorage } from 'node:async_hooks';

const running = new AsyncLocalStorage<{ requestId: string }>();

/**
 * The request_id of the job run in progress (`sched_<job>_<due ms>`, or an admin trigger's),
 * set by the worker's edge (workers/registry.ts runJob): a job service that records webhook
 * events names it as their cause without every caller passing it down.
 */
export function runAsJob<T>(requestId: string, work: () => T): T {
  return running.run({ requestId }, work);
}

export function jobRequestId(): string | undefined {
  return running.getStore()?.requestId;
}
