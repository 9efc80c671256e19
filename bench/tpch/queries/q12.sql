-- TPC-H Q12, shipping modes and order priority. Parameters: SHIPMODE1, SHIPMODE2 (two
-- different modes), DATE (January 1st, 1993..1997).
select
    l_shipmode,
    sum(case
        when o_orderpriority = '1-URGENT' or o_orderpriority = '2-HIGH' then 1
        else 0
    end) as high_line_count,
    sum(case
        when o_orderpriority <> '1-URGENT' and o_orderpriority <> '2-HIGH' then 1
        else 0
    end) as low_line_count
from
    orders,
    lineitem
where
    o_orderkey = l_orderkey
    and l_shipmode in ('{{SHIPMODE1}}', '{{SHIPMODE2}}')
    and l_commitdate < l_receiptdate
    and l_shipdate < l_commitdate
    and l_receiptdate >= date '{{DATE}}'
    and l_receiptdate < date '{{DATE}}' + interval '1 year'
group by
    l_shipmode
order by
    l_shipmode;
