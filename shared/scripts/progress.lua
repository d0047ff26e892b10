-- progress: processing → processing (pages_done advances, finished pages are kept).
-- Caller: the worker that owns it.
-- KEYS: job, pages (the job's finished pages: number → Page JSON)
-- ARGV: me, pages_done, pages_total, channel, id, ttl_s, then pairs of page number, Page JSON
-- Reply: 'ok' | 'lost' (the job is no longer this worker's)
-- HDEL first (the fields exist since enqueue): it only frees, so under maxmemory the HSETs
-- that follow are still allowed.
-- Needs: event
local job, pages = KEYS[1], KEYS[2]
local v = redis.call('HMGET', job, 'status', 'worker')
if v[1] ~= 'processing' or v[2] ~= ARGV[1] then return 'lost' end
redis.call('HDEL', job, 'pages_done', 'pages_total')
redis.call('HSET', job, 'pages_done', ARGV[2], 'pages_total', ARGV[3])
local numbers = {}
for i = 7, #ARGV, 2 do
  redis.call('HSET', pages, ARGV[i], ARGV[i + 1])
  numbers[#numbers + 1] = tonumber(ARGV[i])
end
if #numbers == 0 then
  event(ARGV[4], ARGV[5], 'processing', tonumber(ARGV[2]))
  return 'ok'
end
redis.call('EXPIRE', pages, tonumber(ARGV[6]))
-- Only a non-empty list is sent: cjson writes an empty table as {}, not [].
redis.call('PUBLISH', ARGV[4], cjson.encode({id=ARGV[5], status='processing',
  pages_done=tonumber(ARGV[2]), pages=numbers}))
return 'ok'
