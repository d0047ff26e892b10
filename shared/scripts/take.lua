-- take: which job a fair-share ticket runs (no transition). Caller: the worker holding it.
-- With fair share a lane entry is a ticket: one per job enqueued, so the stream's length and
-- lag still count every waiting job (KEDA), but the job it runs is the head of the queue of
-- the tenant with the least service (start-time fair queueing over the tenants' virtual
-- starts; a job costs 1/weight when taken, its further pages when it ends: finish.lua).
-- A ticket keeps the job it was given while it is pending (KEYS[3]): a reclaim of the entry
-- runs the same job, and its deliveries count that job's attempts.
-- KEYS: stream, tenants (ZSET tenant → virtual start), taken (HASH entry → "job batch"),
--       clock (the virtual time: the start of the last tenant served)
-- ARGV: me, entry, group, job key prefix, tenant queue prefix, most queue heads to look at
-- Reply: {'new', 'job batch'} | {'again', 'job batch'} | {'none'} (no job waits: the ticket
--        is acked) | {'busy'} (only ended jobs seen so far: call again) | {'not-owner'};
--        after the first one or two, 'job status' of each job skipped (for the worker's log)
-- Jobs are read by a key built from the prefix: the same slot as the stream ({tag}).
-- The first write is LPOP or XACK (both only free), so it works when Redis is full.
-- Needs: owns, ack
local stream, tenants, taken, clock = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local me, entry, group = ARGV[1], ARGV[2], ARGV[3]
if not owns(stream, group, entry, me) then return {'not-owner'} end
local given = redis.call('HGET', taken, entry)
if given then return {'again', given} end
local now = tonumber(redis.call('GET', clock) or '0')
local skipped = {}
local reply = function(...)  -- the reply, then the jobs skipped
  local out = {...}
  for _, seen in ipairs(skipped) do out[#out + 1] = seen end
  return out
end
for _ = 1, tonumber(ARGV[6]) do
  local head = redis.call('ZRANGE', tenants, 0, 0, 'WITHSCORES')
  if #head == 0 then
    ack(stream, group, entry, taken)
    return reply('none')
  end
  local tenant, start = head[1], math.max(tonumber(head[2]), now)
  local queue = ARGV[5] .. tenant
  local item = redis.call('LPOP', queue)
  if redis.call('LLEN', queue) == 0 then redis.call('ZREM', tenants, tenant) end
  local job_id, batch, cost = string.match(item or '', '^(%S+) (%S+) (%S+)$')
  -- A job cancelled or deleted while it waited, or one a duplicated entry ran, is skipped.
  local status = job_id and (redis.call('HGET', ARGV[4] .. job_id, 'status') or 'gone')
  if status == 'queued' then
    -- Increments, not writes: the worker's Redis user may not SET or ZADD (redis_acl.py).
    local score = redis.call('ZSCORE', tenants, tenant)
    if score then
      redis.call('ZINCRBY', tenants, start + tonumber(cost) - tonumber(score), tenant)
    end
    if start > now then redis.call('INCRBYFLOAT', clock, start - now) end
    local job = job_id .. ' ' .. batch
    redis.call('HSET', taken, entry, job)
    -- Deliveries count this job's attempts, not the ticket's before it had one.
    redis.call('XCLAIM', stream, group, me, 0, entry, 'RETRYCOUNT', 1, 'JUSTID')
    return reply('new', job)
  end
  if job_id then skipped[#skipped + 1] = job_id .. ' ' .. status end
end
return reply('busy')
