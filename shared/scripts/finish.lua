-- finish: processing → done | failed. Caller: the worker that owns the job.
-- Writes the outcome, drops the payload, ACKs and XDELs, publishes, and does what every end
-- of a job does (its batch, its webhook); only while this worker still owns both the job and
-- the entry (else it only ACKs an entry that is still its own).
-- KEYS: job, stream, batch, batch_jobs (keys that never exist when none), webhooks,
--       tenant_active (the job's tenant's active set in its partition), pages, files (the
--       job's finished pages and files: they live as long as its result), taken (the lane's
--       fair-share tickets), tenants (the lane's fair-share tenants), usage (the tenant's
--       usage of the day in the job's partition)
-- ARGV: me, entry, group, status, field (result|result_ref|error), value, finished_at, ttl_s,
--       channel, id, pages_done, tenant, charge (fair share: the pages past the first over
--       the tenant's weight), engine, engine_ms, bytes_out, usage_ttl_s
-- Reply: 'ok' | 'lost'
-- The payload goes first: under maxmemory (noeviction) a script's first write decides
-- whether it may grow memory, and HDEL/EXPIRE only ever free it.
-- Needs: owns, ack, event, close_batch, ended, usage
local job, stream, batch, jobs, hooks, active = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5],
  KEYS[6]
local me, entry, group = ARGV[1], ARGV[2], ARGV[3]
local v = redis.call('HMGET', job, 'status', 'worker')
local mine = owns(stream, group, entry, me)
if v[1] ~= 'processing' or v[2] ~= me then
  if mine then ack(stream, group, entry, KEYS[9]) end
  return 'lost'
end
if not mine then return 'lost' end
redis.call('HDEL', job, 'payload')
redis.call('EXPIRE', job, tonumber(ARGV[8]))
redis.call('EXPIRE', KEYS[7], tonumber(ARGV[8]))
redis.call('EXPIRE', KEYS[8], tonumber(ARGV[8]))
-- A result in the object store holds its pages and files there: Redis keeps none of them.
if ARGV[5] == 'result_ref' then redis.call('DEL', KEYS[7], KEYS[8]) end
redis.call('HSET', job, 'status', ARGV[4], ARGV[5], ARGV[6], 'finished_at', ARGV[7],
  'pages_done', ARGV[11])
ack(stream, group, entry, KEYS[9])
-- A long job is charged its pages once they are known, while its tenant still has jobs waiting.
if tonumber(ARGV[13]) > 0 and redis.call('ZSCORE', KEYS[10], ARGV[12]) then
  redis.call('ZINCRBY', KEYS[10], ARGV[13], ARGV[12])
end
usage(KEYS[11], tonumber(ARGV[17]), job, ARGV[4], tonumber(ARGV[11]), ARGV[14],
  tonumber(ARGV[15]), tonumber(ARGV[16]))
event(ARGV[9], ARGV[10], ARGV[4], tonumber(ARGV[11]))
ended(job, ARGV[10], ARGV[4], batch, jobs, hooks, active, ARGV[9], ARGV[7], tonumber(ARGV[8]))
return 'ok'
