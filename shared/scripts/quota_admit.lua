-- quota_admit: count a new job against its tenant's quotas, or say which one it would pass.
-- Caller: the producer, before it writes the job (a job it then fails to write is released).
-- Check and count in one step: no burst of uploads gets past a limit, not even by one.
-- KEYS: inflight (HASH job → "pages admitted_ms", the tenant's jobs waiting or running), inflight_pages,
--       day (the tenant's pages accepted today)
-- ARGV: job id, pages, max jobs, max pages in flight, max pages per day (0: no limit),
--       day_ttl_s, now_ms (kept beside the pages: a job not yet written is not one that ended)
-- Reply: {'ok'} | {'over', limit name, limit, current}
-- Needs: (nothing)
local inflight, flying_key, day = KEYS[1], KEYS[2], KEYS[3]
local job, pages = ARGV[1], tonumber(ARGV[2])
local max_jobs, max_pages, max_day = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if redis.call('HEXISTS', inflight, job) == 1 then return {'ok'} end  -- counted already
local jobs = redis.call('HLEN', inflight)
if max_jobs > 0 and jobs >= max_jobs then return {'over', 'concurrent_jobs', max_jobs, jobs} end
local flying = tonumber(redis.call('GET', flying_key) or '0')
if max_pages > 0 and flying + pages > max_pages then
  return {'over', 'pages_in_flight', max_pages, flying}
end
local used = tonumber(redis.call('GET', day) or '0')
if max_day > 0 and used + pages > max_day then return {'over', 'pages_per_day', max_day, used} end
redis.call('HSET', inflight, job, pages .. ' ' .. ARGV[7])
redis.call('INCRBY', flying_key, pages)
if max_day > 0 then
  redis.call('INCRBY', day, pages)
  redis.call('EXPIRE', day, tonumber(ARGV[6]))
end
return {'ok'}
