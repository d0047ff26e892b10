-- enqueue: (none) → queued. Caller: the producer, inside the MULTI that wrote the job's
-- fields to KEYS[1] (the document never passes through Lua: RENAME moves the hash whole).
-- The checks and every write of a new job in one round trip: the Idempotency-Key, an id
-- the client chose, the tenant's and the lane's backlogs, then the job under its own key,
-- its stream entry, its tenant's index and active set, its fair-share queue, its batch.
-- KEYS: incoming, job, stream, index, active, fair queue, fair tenants,
--       [idem] (when ARGV[12] is 1), [batch, batch jobs] (when ARGV[13] is 1)
-- ARGV: job id, created ms, lane limit, tenant limit (0: none), tenant's active jobs in
--       the other partitions, group, fair (1/0), fair queue item, tenant, index size,
--       index ttl s, idem (1/0), batch (1/0), idem ttl s, given id (1/0), job key prefix,
--       then the stream entry's field/value pairs
-- Reply: {'new'} | {'replay', job id} | {'conflict'} | {'tenant-full', active} |
--        {'lane-full', length}; anything but 'new' leaves nothing behind
-- Needs: (nothing)
local incoming, job, stream, index, active = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local job_id, created = ARGV[1], ARGV[2]
local has_idem, has_batch = ARGV[12] == '1', ARGV[13] == '1'
local idem = has_idem and KEYS[8] or nil
local refuse = function(...)
  redis.call('DEL', incoming)
  return {...}
end
if has_idem then
  local prior = redis.call('GET', idem)
  if prior and redis.call('EXISTS', ARGV[16] .. prior) == 1 then return refuse('replay', prior) end
end
if ARGV[15] == '1' and redis.call('EXISTS', job) == 1 then return refuse('conflict') end
local limit = tonumber(ARGV[4])
if limit > 0 then
  local held = redis.call('ZCARD', active) + tonumber(ARGV[5])
  if held >= limit then return refuse('tenant-full', held) end
end
local length = redis.call('XLEN', stream)
if length >= tonumber(ARGV[3]) then return refuse('lane-full', length) end
redis.call('RENAME', incoming, job)
redis.call('PERSIST', job)  -- the incoming hash's expiry only guards a failed transaction
-- The group must exist at id 0 before the first entry, or KEDA reads a missing lag; it
-- usually does (BUSYGROUP, ignored).
redis.pcall('XGROUP', 'CREATE', stream, ARGV[6], '0', 'MKSTREAM')
local entry = {}
for i = 17, #ARGV do entry[#entry + 1] = ARGV[i] end
redis.call('XADD', stream, '*', unpack(entry))
if ARGV[7] == '1' then  -- the ticket's job waits in its tenant's queue (shared/fair.py)
  redis.call('RPUSH', KEYS[6], ARGV[8])
  redis.call('ZADD', KEYS[7], 'NX', 0, ARGV[9])
end
if has_idem then redis.call('SET', idem, job_id, 'EX', tonumber(ARGV[14])) end
redis.call('ZADD', index, created, job_id)
redis.call('ZREMRANGEBYRANK', index, 0, -tonumber(ARGV[10]) - 1)
redis.call('EXPIRE', index, tonumber(ARGV[11]))
-- No TTL: the set lives while its jobs do, and the last one's end removes it.
redis.call('ZADD', active, created, job_id)
if has_batch then
  local at = has_idem and 9 or 8
  redis.call('HINCRBY', KEYS[at], 'total', 1)
  redis.call('RPUSH', KEYS[at + 1], job_id)
end
return {'new'}
