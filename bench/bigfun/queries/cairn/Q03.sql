-- Q3 temporal range scan: users with user_since in [{{lo}}, {{hi}}).
SELECT id, alias, name, user_since, friend_ids, employment
FROM GleambookUsers
WHERE user_since >= TIMESTAMP '{{lo}}' AND user_since < TIMESTAMP '{{hi}}'
