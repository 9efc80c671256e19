-- BigFUN's nested datasets (BIGFUN.md §1) in AsterixDB, as the paper's "AsterixKeyOnly"
-- variant: each type declares only the primary key, every other field is open (stored with its
-- name and type tag in every record). Loaded from the same ADM files as load.sql, written by
-- bench/peers/bigfun_adm.py from the generated JSON Lines in {{data_dir}}.
DROP DATAVERSE bigfun IF EXISTS;
CREATE DATAVERSE bigfun;
USE bigfun;
CREATE TYPE GleambookUserType AS { id: int64 };
CREATE TYPE GleambookMessageType AS { message_id: int64 };
CREATE TYPE ChirpMessageType AS { chirpid: int64 };
CREATE DATASET GleambookUsers(GleambookUserType) PRIMARY KEY id;
CREATE DATASET GleambookMessages(GleambookMessageType) PRIMARY KEY message_id;
CREATE DATASET ChirpMessages(ChirpMessageType) PRIMARY KEY chirpid;
LOAD DATASET GleambookUsers USING localfs
  (("path"="127.0.0.1://{{data_dir}}/adm/GleambookUsers.adm"), ("format"="adm"));
LOAD DATASET GleambookMessages USING localfs
  (("path"="127.0.0.1://{{data_dir}}/adm/GleambookMessages.adm"), ("format"="adm"));
LOAD DATASET ChirpMessages USING localfs
  (("path"="127.0.0.1://{{data_dir}}/adm/ChirpMessages.adm"), ("format"="adm"));
