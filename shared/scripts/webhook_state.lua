-- webhook_state: no transition; records where a job's or batch's webhook delivery stands.
-- Caller: the worker delivering it. Writes only to a hash that still exists: a job deleted
-- meanwhile must not come back as a hash without a TTL.
-- KEYS: job or batch hash
-- ARGV: state_json
-- Reply: 1 when written, 0 when the hash is gone
-- Needs: (nothing)
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'webhook', ARGV[1])
return 1
