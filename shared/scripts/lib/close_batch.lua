-- close_batch(batch, jobs, hooks, channel, now_ms, ttl_s): when a sealed batch has every job
-- ended, mark it finished, give it (and its job list) the result TTL, publish the batch's
-- event and queue its webhook. Returns true when this call closed it.
local function close_batch(batch, jobs, hooks, channel, now_ms, ttl_s)
  local b = redis.call('HMGET', batch, 'total', 'done', 'failed', 'cancelled', 'sealed',
    'finished_at', 'id', 'callback')
  if b[5] ~= '1' or b[6] then return false end
  local ended = tonumber(b[2] or 0) + tonumber(b[3] or 0) + tonumber(b[4] or 0)
  if ended < tonumber(b[1] or 0) then return false end
  redis.call('HSET', batch, 'finished_at', now_ms)
  redis.call('EXPIRE', batch, ttl_s)
  redis.call('EXPIRE', jobs, ttl_s)
  redis.call('PUBLISH', channel, cjson.encode({id=b[7], status='finished', pages_done=0}))
  if b[8] then redis.call('XADD', hooks, '*', 'kind', 'batch', 'id', b[7]) end
  return true
end
