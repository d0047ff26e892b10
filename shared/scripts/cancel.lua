-- cancel: queued | processing → cancelled (ARGV[7] 'cancel'); or any state → deleted
-- (ARGV[7] 'delete': an active job is cancelled on the way, so its worker stops).
-- Caller: producer (POST /v1/jobs/{id}/cancel, DELETE /v1/jobs/{id}, DELETE of a batch), for
-- the job's own tenant only. A worker that holds the job sees it cancelled (or gone) at its
-- next heartbeat and stops.
-- KEYS: job, tenant_jobs, batch, batch_jobs (keys that never exist when none), webhooks,
--       tenant_active (the tenant's active set in the job's partition), pages, files (the
--       job's finished pages and files), usage (the tenant's usage of the day in the job's
--       partition)
-- ARGV: tenant, error_json, finished_at, ttl_s, channel, id, mode ('cancel' | 'delete'),
--       usage_ttl_s
-- Reply: 'cancelled' | 'deleted' | 'missing' | '<status>' (cancel of a job that had ended)
-- Memory-freeing writes first (HDEL, EXPIRE), so a cancel works when Redis is full.
-- Needs: event, close_batch, ended, usage
local job, index = KEYS[1], KEYS[2]
local v = redis.call('HMGET', job, 'status', 'tenant')
if not v[1] or v[2] ~= ARGV[1] then return 'missing' end
local active = v[1] == 'queued' or v[1] == 'processing'
if active then
  redis.call('HDEL', job, 'payload')
  redis.call('EXPIRE', job, tonumber(ARGV[4]))
  redis.call('EXPIRE', KEYS[7], tonumber(ARGV[4]))
  redis.call('EXPIRE', KEYS[8], tonumber(ARGV[4]))
  redis.call('HSET', job, 'status', 'cancelled', 'error', ARGV[2], 'finished_at', ARGV[3])
  event(ARGV[5], ARGV[6], 'cancelled', 0)
  ended(job, ARGV[6], 'cancelled', KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[5], ARGV[3],
    tonumber(ARGV[4]))
  usage(KEYS[9], tonumber(ARGV[8]), job, 'cancelled',
    tonumber(redis.call('HGET', job, 'pages_done') or '0'), '', 0, 0)
end
if ARGV[7] == 'cancel' then
  if active then return 'cancelled' end
  return v[1]
end
redis.call('DEL', job, KEYS[7], KEYS[8])
redis.call('ZREM', index, ARGV[6])
redis.call('ZREM', KEYS[6], ARGV[6])  -- already out unless it ended behind a script's back
return 'deleted'
