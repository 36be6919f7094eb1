-- Webhook deliveries are leased like jobs: the process delivering a job's webhook holds
-- `webhook_lease_until` (epoch ms). A `pending` webhook of a finished job whose lease is absent
-- or expired (its process died before delivery) is picked up again by any process.
ALTER TABLE jobs ADD COLUMN webhook_lease_until BIGINT;
