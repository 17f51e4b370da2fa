-- web_secret: the key that signs the dashboard's CSRF tokens (migration 0013: one row).
-- Primary-key lookup; reads only.
SELECT s.secret
FROM akadze_web_secret AS s
WHERE s.id = 1
