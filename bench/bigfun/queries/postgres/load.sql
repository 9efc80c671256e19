-- BigFUN's normalized form (BIGFUN.md §1) in PostgreSQL: six tables, loaded with COPY from the
-- CSV files the generator writes under {{data_dir}}/normalized/.
CREATE EXTENSION IF NOT EXISTS fuzzystrmatch;
CREATE TABLE GleambookUsers (
  id BIGINT PRIMARY KEY,
  alias TEXT NOT NULL,
  name TEXT NOT NULL,
  user_since TIMESTAMP NOT NULL
);
CREATE TABLE Employments (
  id BIGINT NOT NULL,
  organization_name TEXT NOT NULL,
  start_date DATE NOT NULL,
  end_date DATE
);
CREATE TABLE FriendIds (
  id BIGINT NOT NULL,
  friend_id BIGINT NOT NULL
);
CREATE TABLE GleambookMessages (
  message_id BIGINT PRIMARY KEY,
  author_id BIGINT NOT NULL,
  in_response_to BIGINT,
  sender_location_x DOUBLE PRECISION NOT NULL,
  sender_location_y DOUBLE PRECISION NOT NULL,
  send_time TIMESTAMP NOT NULL,
  message TEXT NOT NULL
);
CREATE TABLE ChirpMessages (
  chirpid BIGINT PRIMARY KEY,
  screen_name TEXT NOT NULL,
  lang TEXT NOT NULL,
  friends_count INTEGER NOT NULL,
  statuses_count INTEGER NOT NULL,
  name TEXT NOT NULL,
  followers_count INTEGER NOT NULL,
  sender_location_x DOUBLE PRECISION NOT NULL,
  sender_location_y DOUBLE PRECISION NOT NULL,
  send_time TIMESTAMP NOT NULL,
  message_text TEXT NOT NULL
);
CREATE TABLE ReferredTopics (
  chirpid BIGINT NOT NULL,
  topic TEXT NOT NULL
);
COPY GleambookUsers FROM '{{data_dir}}/normalized/gleambook_users.csv' (FORMAT csv, HEADER true);
COPY Employments FROM '{{data_dir}}/normalized/employments.csv' (FORMAT csv, HEADER true);
COPY FriendIds FROM '{{data_dir}}/normalized/friend_ids.csv' (FORMAT csv, HEADER true);
COPY GleambookMessages FROM '{{data_dir}}/normalized/gleambook_messages.csv' (FORMAT csv, HEADER true);
COPY ChirpMessages FROM '{{data_dir}}/normalized/chirp_messages.csv' (FORMAT csv, HEADER true);
COPY ReferredTopics FROM '{{data_dir}}/normalized/referred_topics.csv' (FORMAT csv, HEADER true)
