-- The secondary indexes of BIGFUN.md §4 that Cairn builds today, created after loading. The
-- primary keys come with the datasets (bench/bigfun/ddl.sql). The keyword/ngram index on
-- message_text is not built yet.
CREATE INDEX users_user_since ON GleambookUsers(user_since);
CREATE INDEX chirps_send_time ON ChirpMessages(send_time);
CREATE INDEX chirps_sender_location ON ChirpMessages(sender_location) TYPE RTREE;
ANALYZE GleambookUsers;
ANALYZE GleambookMessages;
ANALYZE ChirpMessages
