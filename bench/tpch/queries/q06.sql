-- TPC-H Q6, forecasting revenue change. Parameters: DATE (January 1st), QUANTITY (24 or 25), and
-- DISCOUNT_LOW and DISCOUNT_HIGH: the specification's DISCOUNT - 0.01 and DISCOUNT + 0.01
-- (DISCOUNT in 0.02..0.09) computed exactly, because in doubles 0.06 + 0.01 < 0.07.
select
    sum(l_extendedprice * l_discount) as revenue
from
    lineitem
where
    l_shipdate >= date '{{DATE}}'
    and l_shipdate < date '{{DATE}}' + interval '1 year'
    and l_discount between {{DISCOUNT_LOW}} and {{DISCOUNT_HIGH}}
    and l_quantity < {{QUANTITY}};
