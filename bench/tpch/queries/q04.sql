-- TPC-H Q4, order priority checking. Parameter: DATE (first day of a month, 1993-01..1997-10).
select
    o_orderpriority,
    count(*) as order_count
from
    orders
where
    o_orderdate >= date '{{DATE}}'
    and o_orderdate < date '{{DATE}}' + interval '3 months'
    and exists (
        select
            *
        from
            lineitem
        where
            l_orderkey = o_orderkey
            and l_commitdate < l_receiptdate
    )
group by
    o_orderpriority
order by
    o_orderpriority;
