-- The least a new order.paid has to write, as one transaction of three statements against the real
-- tables, for pgbench -M prepared. Compare with the service's own SQL (tmp/bench-*/order-paid.sql).
-- Variables (pgbench -D) are brand, creator and offer: the order row (its settlement line), its
-- accrual and its event. ledger_movements is append-only by trigger, which only inserts here.
-- Random ids keep every transaction a new order.
\set r random(1, 1000000000000000)
begin;
insert into orders (id, brand_id, livemode, order_id, status, amount, commission_amount, commission_balance,
                    creator_id, offer_id, attributed_via, conversion_id, commission_bps, coupon_code, occurred_at, confirm_at)
values ('ord_pgbm_' || :r::text, :brand, true, 'pgbm-' || :r::text, 'pending', 12900, 1290, 1290, :creator, :offer,
        'code', 'conv_pgbm_' || :r::text, 1000, 'MINA10', now(), now() + interval '14 days');
insert into ledger_movements (id, brand_id, livemode, order_id, creator_id, kind, amount, event_id, request_id)
values ('mv_pgbm_' || :r::text, :brand, true, 'ord_pgbm_' || :r::text, :creator, 'accrual', 1290,
        'evt_pgbm_' || :r::text, 'req_pgbm_' || :r::text);
insert into received_events (id, brand_id, livemode, type, order_id, key_kind, occurred_at, received_at, request_id, data)
values ('evt_pgbm_' || :r::text, :brand, true, 'order.paid', 'pgbm-' || :r::text, 'secret', now(), now(),
        'req_pgbm_' || :r::text,
        jsonb_build_object('order_id', 'pgbm-' || :r::text, 'amount', 12900, 'currency', 'KRW', 'coupon_code', 'MINA10'));
commit;
