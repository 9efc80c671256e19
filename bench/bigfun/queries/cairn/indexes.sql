-- The secondary indexes of BIGFUN.md §4, created after loading. The primary keys come with the
-- datasets (bench/bigfun/ddl.sql).
CREATE INDEX users_user_since ON GleambookUsers(user_since);
CREATE INDEX chirps_send_time ON ChirpMessages(send_time);
CREATE INDEX chirps_sender_location ON ChirpMessages(sender_location) TYPE RTREE;
CREATE INDEX chirps_message_words ON ChirpMessages(message_text) TYPE KEYWORD;
CREATE INDEX chirps_message_grams ON ChirpMessages(message_text) TYPE NGRAM(2);
ANALYZE GleambookUsers;
ANALYZE GleambookMessages;
ANALYZE ChirpMessages
