-- U1 (batch) insert: {{count}} complete new GleambookUsers records, given as a JSON array.
INSERT INTO GleambookUsers
SELECT r.id, r.alias, r.name, r.user_since, r.friend_ids, r.employment
FROM (SELECT unnest(from_json('{{records}}', '[{"id": "BIGINT", "alias": "VARCHAR", "name": "VARCHAR", "user_since": "TIMESTAMP", "friend_ids": ["BIGINT"], "employment": [{"organization_name": "VARCHAR", "start_date": "DATE", "end_date": "DATE"}]}]')) AS r)
