-- Q1 unique record retrieval: the GleambookUsers record with id = {{id}}.
SELECT id, alias, name, user_since, friend_ids, employment
FROM GleambookUsers
WHERE id = {{id}}
