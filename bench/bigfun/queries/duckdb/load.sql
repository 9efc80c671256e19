-- BigFUN's nested datasets (BIGFUN.md §1) as native DuckDB tables, loaded from the generated
-- JSON Lines in {{data_dir}}. Points become STRUCT(x, y), as in Cairn.
CREATE TABLE GleambookUsers (
  id BIGINT PRIMARY KEY,
  alias VARCHAR NOT NULL,
  name VARCHAR NOT NULL,
  user_since TIMESTAMP NOT NULL,
  friend_ids BIGINT[] NOT NULL,
  employment STRUCT(organization_name VARCHAR, start_date DATE, end_date DATE)[] NOT NULL
);
INSERT INTO GleambookUsers
SELECT id, alias, name, user_since, friend_ids, employment
FROM read_json('{{data_dir}}/GleambookUsers.json', format = 'newline_delimited', columns = {
  id: 'BIGINT', alias: 'VARCHAR', name: 'VARCHAR', user_since: 'TIMESTAMP', friend_ids: 'BIGINT[]',
  employment: 'STRUCT(organization_name VARCHAR, start_date DATE, end_date DATE)[]'
});
CREATE TABLE GleambookMessages (
  message_id BIGINT PRIMARY KEY,
  author_id BIGINT NOT NULL,
  in_response_to BIGINT,
  sender_location STRUCT(x DOUBLE, y DOUBLE) NOT NULL,
  send_time TIMESTAMP NOT NULL,
  message VARCHAR NOT NULL
);
INSERT INTO GleambookMessages
SELECT message_id, author_id, in_response_to,
       {'x': sender_location[1], 'y': sender_location[2]}, send_time, message
FROM read_json('{{data_dir}}/GleambookMessages.json', format = 'newline_delimited', columns = {
  message_id: 'BIGINT', author_id: 'BIGINT', in_response_to: 'BIGINT',
  sender_location: 'DOUBLE[]', send_time: 'TIMESTAMP', message: 'VARCHAR'
});
CREATE TABLE ChirpMessages (
  chirpid BIGINT PRIMARY KEY,
  "user" STRUCT(screen_name VARCHAR, lang VARCHAR, friends_count INTEGER,
                statuses_count INTEGER, name VARCHAR, followers_count INTEGER) NOT NULL,
  sender_location STRUCT(x DOUBLE, y DOUBLE) NOT NULL,
  send_time TIMESTAMP NOT NULL,
  referred_topics VARCHAR[] NOT NULL,
  message_text VARCHAR NOT NULL
);
INSERT INTO ChirpMessages
SELECT chirpid, "user", {'x': sender_location[1], 'y': sender_location[2]}, send_time,
       referred_topics, message_text
FROM read_json('{{data_dir}}/ChirpMessages.json', format = 'newline_delimited', columns = {
  chirpid: 'BIGINT',
  "user": 'STRUCT(screen_name VARCHAR, lang VARCHAR, friends_count INTEGER, statuses_count INTEGER, name VARCHAR, followers_count INTEGER)',
  sender_location: 'DOUBLE[]', send_time: 'TIMESTAMP', referred_topics: 'VARCHAR[]',
  message_text: 'VARCHAR'
})
