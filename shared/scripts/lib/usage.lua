-- usage(key, ttl_s, job, status, pages, engine, engine_ms, bytes_out): count an ended job in
-- its tenant's usage of the day (a hash per tenant, day and partition). Called by the script
-- that ends the job, in the same step: each job is counted exactly once, whatever the
-- reclaims and retries before.
local function usage(key, ttl_s, job, status, pages, engine, engine_ms, bytes_out)
  redis.call('HINCRBY', key, 'jobs', 1)
  if status ~= 'done' then redis.call('HINCRBY', key, status, 1) end
  redis.call('HINCRBY', key, 'pages', pages)
  if engine ~= '' then
    redis.call('HINCRBY', key, 'pages:' .. engine, pages)
    redis.call('HINCRBY', key, 'engine_ms', engine_ms)
  end
  redis.call('HINCRBY', key, 'bytes_in', tonumber(redis.call('HGET', job, 'size') or '0'))
  redis.call('HINCRBY', key, 'bytes_out', bytes_out)
  if ttl_s > 0 then redis.call('EXPIRE', key, ttl_s) end  -- 0 days: kept until deleted
end
