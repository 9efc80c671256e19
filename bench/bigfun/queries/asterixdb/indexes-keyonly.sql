-- The BIGFUN.md §4 secondary indexes for the "AsterixKeyOnly" variant: the indexed fields are
-- open, so each index names its field's type; AsterixDB builds rtree and text indexes on open
-- fields only as ENFORCED (every record must then carry the field with that type).
USE bigfun;
CREATE INDEX users_user_since ON GleambookUsers(user_since: datetime?) TYPE BTREE;
CREATE INDEX chirps_send_time ON ChirpMessages(send_time: datetime?) TYPE BTREE;
CREATE INDEX chirps_sender_location ON ChirpMessages(sender_location: point?) TYPE RTREE ENFORCED;
CREATE INDEX chirps_text_keyword ON ChirpMessages(message_text: string?) TYPE KEYWORD ENFORCED;
CREATE INDEX chirps_text_ngram ON ChirpMessages(message_text: string?) TYPE NGRAM(2) ENFORCED;
