-- U2 (batch) delete: the GleambookUsers records with the given ids.
DELETE FROM GleambookUsers WHERE id IN ({{ids}})
