-- enqueue: (none) → queued. Caller: producer (POST /v1/jobs, POST /v1/batches).
-- Writes the job hash and its stream entry in one step, or returns the job an
-- Idempotency-Key already names, or refuses when the lane is full. A queued job has no TTL:
-- it lives as long as its entry. A job of a batch is counted and listed in it.
-- KEYS: job, stream, idem ('' when none), tenant_jobs, batch ('' when none), batch_jobs
-- ARGV: job_id, max_backlog, batch_id ('' when none), idem_ttl_s, group, created_ms,
--       index_size, index_ttl_s, field1, value1, ...
-- Reply: {'ok', id} | {'dup', id} | {'full', backlog}
-- Needs: (nothing)
local job, stream, idem, index, batch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
if idem ~= '' then
  local prior = redis.call('GET', idem)
  -- The job key ends with the new id; swap in the prior id to see if that job still exists.
  if prior and redis.call('EXISTS', string.sub(job, 1, #job - #ARGV[1]) .. prior) == 1 then
    return {'dup', prior}
  end
end
-- The backlog is XLEN: entries waiting plus entries in flight.
local backlog = redis.call('XLEN', stream)
if backlog >= tonumber(ARGV[2]) then return {'full', tostring(backlog)} end
-- The group must exist at id 0 before the first entry, or KEDA reads a missing lag.
pcall(redis.call, 'XGROUP', 'CREATE', stream, ARGV[5], '0', 'MKSTREAM')
local fields = {}
for i = 9, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', job, unpack(fields))
if batch ~= '' then
  redis.call('XADD', stream, '*', 'id', ARGV[1], 'batch', ARGV[3])
  redis.call('HINCRBY', batch, 'total', 1)
  redis.call('RPUSH', KEYS[6], ARGV[1])
else
  redis.call('XADD', stream, '*', 'id', ARGV[1])
end
if idem ~= '' then redis.call('SET', idem, ARGV[1], 'EX', tonumber(ARGV[4])) end
-- The tenant's recent jobs (`GET /v1/jobs`): newest kept, the oldest beyond the size dropped.
redis.call('ZADD', index, tonumber(ARGV[6]), ARGV[1])
redis.call('ZREMRANGEBYRANK', index, 0, -tonumber(ARGV[7]) - 1)
redis.call('EXPIRE', index, tonumber(ARGV[8]))
return {'ok', ARGV[1]}
