-- The BIGFUN.md §4 btrees DuckDB can build (ART indexes); it has no spatial or text index
-- without extensions, which cannot be downloaded here. ANALYZE refreshes its statistics.
CREATE INDEX users_user_since ON GleambookUsers(user_since);
CREATE INDEX chirps_send_time ON ChirpMessages(send_time);
ANALYZE
