/**
 * Every item of a paged list, fetched a page at a time as you use them: `for await (const x of
 * list)`, or `await list.toArray()` for all of them at once. Not a promise: `await lf.orders.list()`
 * gives the list itself, which `JSON.stringify` refuses with a TypeError naming `toArray()`.
 */
export interface PagedList<T> extends AsyncIterableIterator<T> {
  /**
   * Every item not iterated yet, every page read, as one array. It holds them all in memory: for
   * a long list (years of orders) iterate with `for await` instead.
   */
  toArray(): Promise<T[]>;
}

/** One page as the API answers it (`object: "list"`). */
export interface Page<T> {
  data: T[];
  has_more: boolean;
  /** Cursor-paged lists; lists paged by `starting_after` have none. */
  next_cursor?: string | null;
}

/**
 * Reads `first` page (`undefined`), then each `next(page)` asks for while the last said
 * `has_more`. `next` answers what to pass to `fetchPage` for the page after `page`, or undefined
 * when there is none.
 */
export function pagedList<T, C>(
  fetchPage: (from: C | undefined) => Promise<Page<T>>,
  next: (page: Page<T>) => C | undefined,
): PagedList<T> {
  const items = (async function* () {
    let from: C | undefined;
    do {
      const page: Page<T> = await fetchPage(from);
      yield* page.data;
      from = page.has_more ? next(page) : undefined;
    } while (from !== undefined);
  })();
  const list: PagedList<T> = {
    next: () => items.next(),
    return: (value?: unknown) => items.return(value as undefined),
    throw: (err?: unknown) => items.throw(err),
    [Symbol.asyncIterator]() {
      return list;
    },
    async toArray() {
      const all: T[] = [];
      for await (const item of list) all.push(item);
      return all;
    },
  };
  // JSON.stringify would write `{}`: say what to call instead.
  Object.defineProperty(list, 'toJSON', {
    enumerable: false,
    value() {
      throw new TypeError(
        'A paged list is an async iterator, read page by page: `await list.toArray()` gives its items as an array.',
      );
    },
  });
  return list;
}

/** Pages that carry `next_cursor`, passed back as `cursor`. */
export const byCursor = <T>(fetchPage: (cursor: string | undefined) => Promise<Page<T>>) =>
  pagedList(fetchPage, (page) => page.next_cursor ?? undefined);

/** Pages that continue `starting_after` the last item's id. */
export const byStartingAfter = <T extends { id: string }>(
  fetchPage: (startingAfter: string | undefined) => Promise<Page<T>>,
) => pagedList(fetchPage, (page) => page.data.at(-1)?.id);
