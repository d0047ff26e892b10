-- save_files: keep a job's files (figure crops, the searchable PDF) before it finishes.
-- Caller: the worker that owns the job, just before finish.
-- KEYS: job, files (the job's files: name → bytes)
-- ARGV: me, ttl_s, then pairs of name, bytes
-- Reply: 'ok' | 'lost' (the job is no longer this worker's: nothing written)
-- Needs: (nothing)
local job, files = KEYS[1], KEYS[2]
local v = redis.call('HMGET', job, 'status', 'worker')
if v[1] ~= 'processing' or v[2] ~= ARGV[1] then return 'lost' end
for i = 3, #ARGV, 2 do
  redis.call('HSET', files, ARGV[i], ARGV[i + 1])
end
redis.call('EXPIRE', files, tonumber(ARGV[2]))
return 'ok'
