-- BigFUN's nested datasets (BIGFUN.md §1) in AsterixDB, as the paper's "AsterixSchema" variant:
-- every field declared (open types, AsterixDB's default). Loaded with AsterixDB's bulk loader
-- from the ADM files bench/peers/bigfun_adm.py writes from the generated JSON Lines in
-- {{data_dir}} (ADM spells datetimes, points and multisets with constructors; JSON cannot).
DROP DATAVERSE bigfun IF EXISTS;
CREATE DATAVERSE bigfun;
USE bigfun;
CREATE TYPE EmploymentType AS {
  organization_name: string, start_date: date, end_date: date?
};
CREATE TYPE GleambookUserType AS {
  id: int64, alias: string, name: string, user_since: datetime,
  friend_ids: {{ int64 }}, employment: [EmploymentType]
};
CREATE TYPE GleambookMessageType AS {
  message_id: int64, author_id: int64, in_response_to: int64?,
  sender_location: point, send_time: datetime, message: string
};
CREATE TYPE ChirpUserType AS {
  screen_name: string, lang: string, friends_count: int32, statuses_count: int32,
  name: string, followers_count: int32
};
CREATE TYPE ChirpMessageType AS {
  chirpid: int64, `user`: ChirpUserType, sender_location: point, send_time: datetime,
  referred_topics: {{ string }}, message_text: string
};
CREATE DATASET GleambookUsers(GleambookUserType) PRIMARY KEY id;
CREATE DATASET GleambookMessages(GleambookMessageType) PRIMARY KEY message_id;
CREATE DATASET ChirpMessages(ChirpMessageType) PRIMARY KEY chirpid;
LOAD DATASET GleambookUsers USING localfs
  (("path"="127.0.0.1://{{data_dir}}/adm/GleambookUsers.adm"), ("format"="adm"));
LOAD DATASET GleambookMessages USING localfs
  (("path"="127.0.0.1://{{data_dir}}/adm/GleambookMessages.adm"), ("format"="adm"));
LOAD DATASET ChirpMessages USING localfs
  (("path"="127.0.0.1://{{data_dir}}/adm/ChirpMessages.adm"), ("format"="adm"));
