-- One page of GET /v1/orders?limit=500 as SQL, for pgbench -M simple (as read-order.sql): the key
-- lookup when the service does one per request, then listOrders (src/modules/orders/orders.service.ts)
-- continuing after a random order the bench grew: its transaction turns sorts and bitmap scans off
-- (set_config, local to the transaction) and runs the keyset query, limit + 1 rows, the cursor
-- column formatted as the service does (chr(58) is the colon, which pgbench would otherwise read as
-- a variable inside the format string). The service decodes the starting position from the signed
-- cursor; here the statement before the transaction looks it up (one unique-index probe).
-- Variables (pgbench -D) are keylookup, keyhash, brand, prefix and orders, as in read-order.sql.
\set n random(1, :orders)
\if :keylookup
select k.id, k.brand_id, k.livemode, k.kind, k.revoked_at, b.name, b.status, b.platform, b.allowed_origins,
       b.rate_limit_per_s, b.rate_limit_burst, b.confirm_period_days, b.recurring_commission_cycles,
       b.default_commission_bps
  from api_keys k join brands b on b.id = k.brand_id
 where k.secret_hash = ':keyhash';
\endif
select coalesce(o.occurred_at, '-infinity') as after_at, coalesce(o.id, '') as after_id
  from (values (1)) v
  left join orders o on (o.brand_id || '/' || case when o.livemode then 'live' else 'test' end || '/' || o.order_id) = ':brand/live/:prefix:n'
\gset
begin;
select set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true);
select *, to_char(occurred_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24' || chr(58) || 'MI' || chr(58) || 'SS.US"Z"') as cursor_occurred_at
  from orders
 where brand_id = ':brand' and livemode = true and (occurred_at, id) > (':after_at'::timestamptz, ':after_id')
 order by occurred_at, id
 limit 501;
commit;
