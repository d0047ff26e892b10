-- quota_release: a job of the tenant is no longer waiting or running (it ended, or its
-- upload was not written). Caller: the worker or producer that ended it; the producer's
-- admission for jobs it finds ended. Idempotent: a job is released at most once.
-- KEYS: inflight, inflight_pages, day
-- ARGV: job id, refund ('1': the job was never written; its pages go back to the day)
-- Reply: 1 when released, 0 when it was not counted
-- Needs: (nothing)
local counted = redis.call('HGET', KEYS[1], ARGV[1])
if not counted then return 0 end
local pages = tonumber(string.match(counted, '^(%d+)'))
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('DECRBY', KEYS[2], pages)
if ARGV[2] == '1' and redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('DECRBY', KEYS[3], pages)
end
return 1
