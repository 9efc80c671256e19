-- U1 (batch) insert: {{count}} complete new GleambookUsers records, given as JSON objects.
INSERT INTO GleambookUsers {{records}}
