-- The BigFUN datasets (../shared/BIGFUN.md §1) in Cairn's AsterixDB-style DDL. Open types, as
-- in the paper's AsterixSchema variant: declared fields are typed columns, anything else is
-- kept per record.

CREATE TYPE EmploymentType AS OPEN {
  organization_name: string,
  start_date: date,
  end_date: date?
};

CREATE TYPE GleambookUserType AS OPEN {
  id: int64,
  alias: string,
  name: string,
  user_since: datetime,
  friend_ids: {{ int64 }},
  employment: [EmploymentType]
};

CREATE TYPE GleambookMessageType AS OPEN {
  message_id: int64,
  author_id: int64,
  in_response_to: int64?,
  sender_location: point,
  send_time: datetime,
  message: string
};

CREATE TYPE ChirpUserType AS OPEN {
  screen_name: string,
  lang: string,
  friends_count: int32,
  statuses_count: int32,
  name: string,
  followers_count: int32
};

CREATE TYPE ChirpMessageType AS OPEN {
  chirpid: int64,
  user: ChirpUserType,
  sender_location: point,
  send_time: datetime,
  referred_topics: {{ string }},
  message_text: string
};

CREATE DATASET GleambookUsers(GleambookUserType) PRIMARY KEY id;
CREATE DATASET GleambookMessages(GleambookMessageType) PRIMARY KEY message_id;
CREATE DATASET ChirpMessages(ChirpMessageType) PRIMARY KEY chirpid;
