-- Q3 temporal range scan: users with user_since in [{{lo}}, {{hi}}).
USE bigfun;
SELECT VALUE [u.id, u.alias, u.name, u.user_since, u.friend_ids, u.employment]
FROM GleambookUsers u
WHERE u.user_since >= datetime('{{lo}}') AND u.user_since < datetime('{{hi}}');
