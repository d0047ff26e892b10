-- poison: queued | processing → failed (code poisoned). Caller: the worker that reclaimed
-- an entry delivered more than OCRQ_MAX_DELIVERIES times; copies it to the dead stream.
-- KEYS: job, stream, dead, batch, batch_jobs (keys that never exist when none), webhooks,
--       tenant_active (the job's tenant's active set in its partition), taken (the lane's
--       fair-share tickets), usage (the tenant's usage of the day in the job's partition)
-- ARGV: me, entry, group, error_json, finished_at, ttl_s, channel, id, lane, deliveries,
--       usage_ttl_s
-- Reply: 'ok' | 'lost'
-- Memory-freeing writes first (HDEL, EXPIRE), so it works when Redis is full.
-- Needs: owns, ack, event, close_batch, ended, usage
local job, stream, dead = KEYS[1], KEYS[2], KEYS[3]
local me, entry, group = ARGV[1], ARGV[2], ARGV[3]
if not owns(stream, group, entry, me) then return 'lost' end
local status = redis.call('HGET', job, 'status')
if status == 'queued' or status == 'processing' then
  redis.call('HDEL', job, 'payload')
  redis.call('EXPIRE', job, tonumber(ARGV[6]))
  redis.call('HSET', job, 'status', 'failed', 'error', ARGV[4], 'finished_at', ARGV[5])
  event(ARGV[7], ARGV[8], 'failed', 0)
  redis.call('XADD', dead, 'MAXLEN', '~', 10000, '*', 'id', ARGV[8], 'lane', ARGV[9],
    'entry', entry, 'deliveries', ARGV[10])
  ended(job, ARGV[8], 'failed', KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[7], ARGV[5],
    tonumber(ARGV[6]))
  usage(KEYS[9], tonumber(ARGV[11]), job, 'failed',
    tonumber(redis.call('HGET', job, 'pages_done') or '0'), '', 0, 0)
end
ack(stream, group, entry, KEYS[8])
return 'ok'
