-- Created before the "-IX" runs of Q12–Q15: a btree on GleambookMessages.author_id. AsterixDB
-- uses it for a join only when the query carries the /*+ indexnl */ hint; the BigFUN queries
-- carry none, so the "-IX" rows show what it does unaided (BIGFUN.md §2).
USE bigfun;
CREATE INDEX messages_author_id ON GleambookMessages(author_id) TYPE BTREE;
