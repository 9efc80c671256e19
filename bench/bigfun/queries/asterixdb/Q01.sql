-- Q1 unique record retrieval: the GleambookUsers record with id = {{id}}.
USE bigfun;
SELECT VALUE [u.id, u.alias, u.name, u.user_since, u.friend_ids, u.employment]
FROM GleambookUsers u
WHERE u.id = {{id}};
