-- Created before the "-IX" runs of Q12–Q15 in the "AsterixKeyOnly" variant: a btree on the open
-- field GleambookMessages.author_id. As in index-author.sql, the unhinted joins do not use it.
USE bigfun;
CREATE INDEX messages_author_id ON GleambookMessages(author_id: int64?) TYPE BTREE;
