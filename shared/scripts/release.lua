-- release: processing → queued. Caller: a draining worker, for what it could not finish.
-- The entry's idle time jumps past the visibility timeout (JUSTID: no extra delivery
-- counted), so the next reclaim takes it at once.
-- KEYS: job, stream
-- ARGV: me, entry, group, idle_ms, channel, id
-- Reply: 1 when released, 0 when the entry was not this worker's
-- Needs: event
local job, stream = KEYS[1], KEYS[2]
local me, entry, group = ARGV[1], ARGV[2], ARGV[3]
local p = redis.call('XPENDING', stream, group, entry, entry, 1, me)
if #p == 0 then return 0 end
-- The next reclaim counts a delivery; a drain is not the job's fault, so take one off first.
local retries = math.max(0, tonumber(p[1][4]) - 1)
redis.call('XCLAIM', stream, group, me, 0, entry, 'IDLE', ARGV[4], 'RETRYCOUNT', retries, 'JUSTID')
local v = redis.call('HMGET', job, 'status', 'worker')
if v[1] == 'processing' and v[2] == me then
  redis.call('HSET', job, 'status', 'queued', 'worker', '')
  event(ARGV[5], ARGV[6], 'queued', 0)
end
return 1
