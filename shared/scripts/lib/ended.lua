-- ended(job, id, status, batch, jobs, hooks, active, channel, now_ms, ttl_s): what every
-- terminal transition of a job also does, in the same step: take it out of its tenant's
-- active set (the tenant's backlog), queue the job's webhook, count the job in its batch
-- (unless it has none, or it was deleted), publish the batch's progress, and close the
-- batch if it was last.
local function ended(job, id, status, batch, jobs, hooks, active, channel, now_ms, ttl_s)
  redis.call('ZREM', active, id)
  if redis.call('HEXISTS', job, 'callback') == 1 then
    redis.call('XADD', hooks, '*', 'kind', 'job', 'id', id)
  end
  if redis.call('EXISTS', batch) == 0 then return end
  redis.call('HINCRBY', batch, status, 1)
  if not close_batch(batch, jobs, hooks, channel, now_ms, ttl_s) then
    local batch_id = redis.call('HGET', batch, 'id')
    redis.call('PUBLISH', channel, cjson.encode({id=batch_id, status='progress', pages_done=0}))
  end
end
