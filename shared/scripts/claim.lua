-- claim: queued → processing (also a reclaimed processing → processing). Caller: worker.
-- Takes the job for consumer ARGV[1] unless it has ended, or is alive under another entry.
-- An active job has no TTL: it lives as long as its stream entry (it never silently expires).
-- KEYS: job, stream, taken (the lane's fair-share tickets: entry → job; take.lua)
-- ARGV: me, entry, group, now_ms
-- Reply: 'ok' | 'skip:<status>' | 'skip:not-owner' | 'missing'
-- Under maxmemory (noeviction) the first write decides: HDEL of the `worker` field (written
-- empty at enqueue and release), which only frees, comes before HSET, so a claim still works
-- when Redis is full.
-- Needs: owns, ack
local job, stream, taken = KEYS[1], KEYS[2], KEYS[3]
local me, entry, group = ARGV[1], ARGV[2], ARGV[3]
-- An entry another consumer took over meanwhile (a reclaim) is not ours to start.
if not owns(stream, group, entry, me) then return 'skip:not-owner' end
local status = redis.call('HGET', job, 'status')
if not status then ack(stream, group, entry, taken); return 'missing' end
if status == 'processing' then
  local w = redis.call('HMGET', job, 'worker', 'entry')
  if w[2] ~= entry and w[1] and w[2] and owns(stream, group, w[2], w[1]) then
    -- A duplicated XADD: the job is alive under another entry; drop this one.
    ack(stream, group, entry, taken); return 'skip:duplicate'
  end
  -- A reclaimed entry: its worker went idle past the visibility timeout.
  status = 'queued'
end
if status ~= 'queued' then ack(stream, group, entry, taken); return 'skip:' .. status end
redis.call('HDEL', job, 'worker')
redis.call('HSET', job, 'status', 'processing', 'worker', me, 'started_at', ARGV[4],
  'entry', entry, 'pages_done', 0)
redis.call('HINCRBY', job, 'attempts', 1)
return 'ok'
