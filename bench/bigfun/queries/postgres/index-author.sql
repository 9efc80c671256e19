-- Created before the "-IX" runs of Q12–Q15: the btree on GleambookMessages.author_id, with the
-- table clustered on it (BIGFUN.md §4), and fresh statistics.
CREATE INDEX messages_author_id ON GleambookMessages(author_id);
CLUSTER GleambookMessages USING messages_author_id;
ANALYZE GleambookMessages
