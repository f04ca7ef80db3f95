-- GET /v1/orders/{order_id} as SQL, for pgbench -M simple (the service sends the order query with
-- its values written into the text, MikroORM's em.execute, so it is planned on every request): the
-- key lookup (keyLookupSql in src/modules/keys/keys.service.ts) when the service does one per
-- request, and the one-order query of getOrder (src/modules/orders/orders.service.ts), for a random
-- order the bench grew. Variables (pgbench -D) are keylookup (1 or 0; the bench sets 1 when the
-- captured order.paid SQL of scripts/bench/ingest-sql.ts still looks the key up), keyhash (sha256 of
-- the secret key), brand, prefix and orders (the order ids are the prefix followed by 1 to orders).
\set n random(1, :orders)
\if :keylookup
select k.id, k.brand_id, k.livemode, k.kind, k.revoked_at, b.name, b.status, b.platform, b.allowed_origins,
       b.rate_limit_per_s, b.rate_limit_burst, b.confirm_period_days, b.recurring_commission_cycles,
       b.default_commission_bps
  from api_keys k join brands b on b.id = k.brand_id
 where k.secret_hash = ':keyhash';
\endif
select * from orders where (brand_id || '/' || case when livemode then 'live' else 'test' end || '/' || order_id) = ':brand/live/:prefix:n';
