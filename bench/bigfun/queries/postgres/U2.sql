-- U2 (batch) delete: the users with the given ids, with their FriendIds and Employments rows.
WITH friends AS (
  DELETE FROM FriendIds WHERE id IN ({{ids}})
), jobs AS (
  DELETE FROM Employments WHERE id IN ({{ids}})
)
DELETE FROM GleambookUsers WHERE id IN ({{ids}})
