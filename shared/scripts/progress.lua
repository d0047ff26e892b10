-- progress: processing → processing (pages_done advances). Caller: the worker that owns it.
-- KEYS: job
-- ARGV: me, pages_done, pages_total, channel, id, ttl_s
-- Reply: 'ok' | 'lost' (the job is no longer this worker's)
-- EXPIRE first: it never grows memory, so progress is still written when Redis is full.
-- Needs: event
local job = KEYS[1]
local v = redis.call('HMGET', job, 'status', 'worker')
if v[1] ~= 'processing' or v[2] ~= ARGV[1] then return 'lost' end
redis.call('EXPIRE', job, tonumber(ARGV[6]))
redis.call('HSET', job, 'pages_done', ARGV[2], 'pages_total', ARGV[3])
event(ARGV[4], ARGV[5], 'processing', tonumber(ARGV[2]))
return 'ok'
