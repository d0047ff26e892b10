-- progress: processing → processing (pages_done advances). Caller: the worker that owns it.
-- KEYS: job
-- ARGV: me, pages_done, pages_total, channel, id
-- Reply: 'ok' | 'lost' (the job is no longer this worker's)
-- HDEL first (the fields exist since enqueue): it only frees, so under maxmemory the HSET
-- that follows is still allowed.
-- Needs: event
local job = KEYS[1]
local v = redis.call('HMGET', job, 'status', 'worker')
if v[1] ~= 'processing' or v[2] ~= ARGV[1] then return 'lost' end
redis.call('HDEL', job, 'pages_done', 'pages_total')
redis.call('HSET', job, 'pages_done', ARGV[2], 'pages_total', ARGV[3])
event(ARGV[4], ARGV[5], 'processing', tonumber(ARGV[2]))
return 'ok'
