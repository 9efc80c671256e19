-- The indexes of BIGFUN.md §4 for the normalized systems, tables clustered as listed, then
-- ANALYZE. PostgreSQL has no spatial index without PostGIS and no text index used here.
CLUSTER GleambookUsers USING gleambookusers_pkey;
CREATE INDEX users_user_since ON GleambookUsers(user_since);
CREATE INDEX employments_id ON Employments(id);
CLUSTER Employments USING employments_id;
CREATE INDEX friend_ids_id ON FriendIds(id);
CLUSTER FriendIds USING friend_ids_id;
CLUSTER ChirpMessages USING chirpmessages_pkey;
CREATE INDEX chirps_send_time ON ChirpMessages(send_time);
CREATE INDEX referred_topics_chirpid ON ReferredTopics(chirpid);
CLUSTER ReferredTopics USING referred_topics_chirpid;
ANALYZE
