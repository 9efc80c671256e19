-- TPC-H Q15, top supplier. Parameter: DATE (first day of a month, 1993-01..1997-10).
-- The specification's view is a common table expression, and the top supplier is chosen by
-- rank() over one computation of it rather than by `= (select max(total_revenue) ...)`: with
-- money as doubles, two computations of the same sum may differ in their last bit, and then no
-- row equals the maximum. Ties still all rank first, so the answer is the specification's.
with revenue0 (supplier_no, total_revenue) as (
    select
        l_suppkey,
        sum(l_extendedprice * (1 - l_discount))
    from
        lineitem
    where
        l_shipdate >= date '{{DATE}}'
        and l_shipdate < date '{{DATE}}' + interval '3 months'
    group by
        l_suppkey
)
select
    s_suppkey,
    s_name,
    s_address,
    s_phone,
    total_revenue
from
    supplier,
    (
        select
            supplier_no,
            total_revenue,
            rank() over (order by total_revenue desc) as revenue_rank
        from
            revenue0
    ) as ranked
where
    s_suppkey = supplier_no
    and revenue_rank = 1
order by
    s_suppkey;
