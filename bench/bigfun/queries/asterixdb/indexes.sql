-- The BIGFUN.md §4 secondary indexes in AsterixDB: btrees on the time fields, an rtree on the
-- chirps' locations, and both text indexes on their text (keyword for exact words, ngram(2)
-- for edit-distance similarity). AsterixDB keeps its statistics as it loads; it has no ANALYZE.
USE bigfun;
CREATE INDEX users_user_since ON GleambookUsers(user_since) TYPE BTREE;
CREATE INDEX chirps_send_time ON ChirpMessages(send_time) TYPE BTREE;
CREATE INDEX chirps_sender_location ON ChirpMessages(sender_location) TYPE RTREE;
CREATE INDEX chirps_text_keyword ON ChirpMessages(message_text) TYPE KEYWORD;
CREATE INDEX chirps_text_ngram ON ChirpMessages(message_text) TYPE NGRAM(2);
