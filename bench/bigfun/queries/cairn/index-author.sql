-- Created before the "-IX" runs of Q12–Q15: the btree on GleambookMessages.author_id.
CREATE INDEX messages_author_id ON GleambookMessages(author_id)
