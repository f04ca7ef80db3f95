import type { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { callerOf } from '../../http/context.js';
import { allPages, CSV_PAGE, streamCsv, wantsCsv } from '../../http/csv.js';
import { route, secretKeyRequired } from '../../http/route.js';
import type { ErrorCode } from '../../shared/errors.js';
import { getCreator, listCreators } from './creators.read.js';
import {
  CreatorBalance,
  CreatorList,
  CreatorListQuery,
  CreatorOut,
  CreatorParams,
  creatorExample,
} from './creators.schemas.js';

/** Creators' balances are the brand's books: read from its server, never with a browser's key. */
const secretKeyForCreators = secretKeyRequired('Creators can only be read');

/** A creator's balance is an object in JSON; in CSV each of its fields is a column of its own (`balance.pending`). */
const creatorCsvColumns = Object.keys(CreatorOut.shape).flatMap((field) =>
  field === 'balance' ? Object.keys(CreatorBalance.shape).map((part) => `balance.${part}`) : [field],
);

const common: ErrorCode[] = ['invalid_api_key', 'brand_not_active', 'secret_key_required'];
/** A path parameter that is not valid (a NUL in it, too long) is refused as the body's fields are. */
const byId: ErrorCode[] = [...common, 'invalid_request_body'];

export function creatorRoutes({ orm, config }: AppDeps) {
  return [
    route({
      method: 'get',
      path: '/v1/creators',
      operationId: 'listCreators',
      summary: 'List creators with their balances',
      description:
        "The brand's creators in creation order, cursor-paged, each with its discount codes and its commission balance in the key's mode, summed from the ledger when read.",
      tag: 'Creators',
      security: 'secret_key',
      refusePublishableKey: secretKeyForCreators,
      query: CreatorListQuery,
      csv: {
        columns: creatorCsvColumns,
        description:
          'Every creator (after `cursor`, if given; `limit` does not apply), one row each: the balance one column per field (`balance.pending`, …), `codes` and `tier` as JSON.',
      },
      responses: {
        200: {
          description: 'One page of creators.',
          schema: CreatorList,
          example: { object: 'list', data: [creatorExample], has_more: false, next_cursor: null },
        },
      },
      errors: [...common, 'invalid_cursor'],
      async handle(req, res, { query }) {
        const caller = callerOf(req);
        const csv = wantsCsv(req);
        const read = (cursor: string | undefined) =>
          listCreators(
            orm.em.fork(),
            caller,
            { limit: csv ? CSV_PAGE : query.limit, cursor },
            config.SECRET_KEY_BASE,
          );
        const page = await read(query.cursor);
        if (csv) return streamCsv(res, 'creators.csv', creatorCsvColumns, allPages(page, read));
        res.json({ object: 'list', ...page } satisfies z.input<typeof CreatorList>);
      },
    }),
    route({
      method: 'get',
      path: '/v1/creators/{creator_id}',
      operationId: 'getCreator',
      summary: 'Read one creator with its balance',
      description:
        "What the brand will pay and has paid the creator, in KRW, in the key's mode: pending, payable, paid out, and clawbacks not netted yet.",
      tag: 'Creators',
      security: 'secret_key',
      refusePublishableKey: secretKeyForCreators,
      params: CreatorParams,
      responses: { 200: { description: 'The creator.', schema: CreatorOut, example: creatorExample } },
      errors: [...byId, 'creator_not_found'],
      async handle(req, res, { params }) {
        res.json(await getCreator(orm.em.fork(), callerOf(req), params.creator_id));
      },
    }),
  ];
}
