-- Q2 key range scan: users with id in [{{lo}}, {{hi}}).
USE bigfun;
SELECT VALUE [u.id, u.alias, u.name, u.user_since, u.friend_ids, u.employment]
FROM GleambookUsers u
WHERE u.id >= {{lo}} AND u.id < {{hi}};
