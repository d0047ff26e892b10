-- cancel: queued | processing → cancelled; or done | failed | cancelled → (deleted).
-- Caller: producer (DELETE /v1/jobs/{id}), for the job's own tenant only. A worker that
-- holds a cancelled job sees it at its next heartbeat and stops.
-- KEYS: job, tenant_jobs
-- ARGV: tenant, error_json, finished_at, ttl_s, channel, id
-- Reply: 'cancelled' | 'deleted' | 'missing'
-- Memory-freeing writes first (HDEL, EXPIRE), so a cancel works when Redis is full.
-- Needs: event
local job, index = KEYS[1], KEYS[2]
local v = redis.call('HMGET', job, 'status', 'tenant')
if not v[1] or v[2] ~= ARGV[1] then return 'missing' end
if v[1] == 'queued' or v[1] == 'processing' then
  redis.call('HDEL', job, 'payload')
  redis.call('EXPIRE', job, tonumber(ARGV[4]))
  redis.call('HSET', job, 'status', 'cancelled', 'error', ARGV[2], 'finished_at', ARGV[3])
  event(ARGV[5], ARGV[6], 'cancelled', 0)
  return 'cancelled'
end
redis.call('DEL', job)
redis.call('ZREM', index, ARGV[6])
return 'deleted'
