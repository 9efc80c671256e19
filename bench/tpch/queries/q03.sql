-- TPC-H Q3, shipping priority. Parameters: SEGMENT, DATE (a day of March 1995).
select
    l_orderkey,
    sum(l_extendedprice * (1 - l_discount)) as revenue,
    o_orderdate,
    o_shippriority
from
    customer,
    orders,
    lineitem
where
    c_mktsegment = '{{SEGMENT}}'
    and c_custkey = o_custkey
    and l_orderkey = o_orderkey
    and o_orderdate < date '{{DATE}}'
    and l_shipdate > date '{{DATE}}'
group by
    l_orderkey,
    o_orderdate,
    o_shippriority
order by
    revenue desc,
    o_orderdate,
    l_orderkey
limit 10;
