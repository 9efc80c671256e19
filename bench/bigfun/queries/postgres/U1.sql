-- U1 (batch) insert: {{count}} complete new users, given as a JSON array, split into their
-- GleambookUsers, FriendIds and Employments rows in one statement.
WITH r AS (
  SELECT * FROM json_to_recordset('{{records}}')
    AS x(id BIGINT, alias TEXT, name TEXT, user_since TIMESTAMP, friend_ids JSON, employment JSON)
), users AS (
  INSERT INTO GleambookUsers SELECT id, alias, name, user_since FROM r
), friends AS (
  INSERT INTO FriendIds SELECT r.id, f.value::TEXT::BIGINT FROM r, json_array_elements(r.friend_ids) AS f
), jobs AS (
  INSERT INTO Employments
  SELECT r.id, j->>'organization_name', (j->>'start_date')::DATE, (j->>'end_date')::DATE
  FROM r, json_array_elements(r.employment) AS j
)
SELECT count(*) FROM r
