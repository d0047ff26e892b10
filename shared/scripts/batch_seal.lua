-- batch_seal: open → sealed (every document has been read), and finished at once when every
-- job already ended. Caller: producer, at the end of POST /v1/batches (also when it failed
-- part way: what was accepted stays a batch).
-- KEYS: batch, batch_jobs, webhooks
-- ARGV: channel, now_ms, ttl_s, rejected_json
-- Reply: 1 when the batch finished now, else 0
-- Needs: close_batch
redis.call('HSET', KEYS[1], 'sealed', 1, 'rejected', ARGV[4])
if close_batch(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3])) then return 1 end
local batch_id = redis.call('HGET', KEYS[1], 'id')
redis.call('PUBLISH', ARGV[1], cjson.encode({id=batch_id, status='sealed', pages_done=0}))
return 0
