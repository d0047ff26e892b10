"""Every Redis key ocrq uses, and the Lua scripts for every state transition.

Each script checks the current state before it writes, so a cancel racing a finishing
worker, or two workers after a reclaim, cannot lose an update. Scripts use only commands
that Redis 7.0 has.
"""

from __future__ import annotations

from shared.settings import GROUP, LANES


class Keys:
    """The key layout under one prefix (default ``ocrq:``)."""

    def __init__(self, prefix: str = "ocrq:") -> None:
        self.prefix = prefix
        self.group = GROUP
        self.lanes = LANES
        self.dead = f"{prefix}dead"
        self.events = f"{prefix}events"

    def job(self, job_id: str) -> str:
        """The job hash."""
        return f"{self.prefix}job:{job_id}"

    def stream(self, lane: str) -> str:
        """The lane's stream; one entry per job."""
        return f"{self.prefix}stream:{lane}"

    def idem(self, tenant: str, key: str) -> str:
        """Idempotency-Key → job id, with a TTL."""
        return f"{self.prefix}idem:{tenant}:{key}"

    def batch(self, batch_id: str) -> str:
        """Back-office batch counters."""
        return f"{self.prefix}batch:{batch_id}"


# Shared prologue: does consumer ARGV[me] own stream entry ARGV[entry] in the group?
_OWNS = """
local function owns(stream, group, entry, me)
  local p = redis.call('XPENDING', stream, group, entry, entry, 1, me)
  return #p == 1
end
local function ack(stream, group, entry)
  redis.call('XACK', stream, group, entry)
  redis.call('XDEL', stream, entry)
end
local function event(channel, id, status, pages_done)
  redis.call('PUBLISH', channel, cjson.encode({id=id, status=status, pages_done=pages_done}))
end
"""

# KEYS: job, stream, idem ('' when none)
# ARGV: job_id, max_backlog, ttl_s, idem_ttl_s, group, field1, value1, ...
# → {'ok', id} | {'dup', id} | {'full', backlog}
ENQUEUE = """
local job, stream, idem = KEYS[1], KEYS[2], KEYS[3]
if idem ~= '' then
  local prior = redis.call('GET', idem)
  -- The job key ends with the new id; swap in the prior id to see if that job still exists.
  if prior and redis.call('EXISTS', string.sub(job, 1, #job - #ARGV[1]) .. prior) == 1 then
    return {'dup', prior}
  end
end
local backlog = redis.call('XLEN', stream)
if backlog >= tonumber(ARGV[2]) then return {'full', tostring(backlog)} end
-- The group must exist at id 0 before the first entry, or KEDA reads a missing lag.
pcall(redis.call, 'XGROUP', 'CREATE', stream, ARGV[5], '0', 'MKSTREAM')
local fields = {}
for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', job, unpack(fields))
redis.call('EXPIRE', job, tonumber(ARGV[3]))
redis.call('XADD', stream, '*', 'id', ARGV[1])
if idem ~= '' then redis.call('SET', idem, ARGV[1], 'EX', tonumber(ARGV[4])) end
return {'ok', ARGV[1]}
"""

# KEYS: job, stream   ARGV: me, entry, group, now_ms, ttl_s
# → 'ok' | 'skip:<status>' | 'missing'
CLAIM = (
    _OWNS
    + """
local job, stream = KEYS[1], KEYS[2]
local me, entry, group = ARGV[1], ARGV[2], ARGV[3]
local status = redis.call('HGET', job, 'status')
if not status then ack(stream, group, entry); return 'missing' end
if status == 'processing' then
  local w = redis.call('HMGET', job, 'worker', 'entry')
  if w[2] ~= entry and w[1] and w[2] and owns(stream, group, w[2], w[1]) then
    -- A duplicated XADD: the job is alive under another entry; drop this one.
    ack(stream, group, entry); return 'skip:duplicate'
  end
  -- A reclaimed entry: its worker went idle past the visibility timeout.
  status = 'queued'
end
if status ~= 'queued' then ack(stream, group, entry); return 'skip:' .. status end
redis.call('HSET', job, 'status', 'processing', 'worker', me, 'started_at', ARGV[4],
  'entry', entry, 'pages_done', 0)
redis.call('HINCRBY', job, 'attempts', 1)
redis.call('EXPIRE', job, tonumber(ARGV[5]))  -- a job started late in its TTL must not vanish
return 'ok'
"""
)

# KEYS: job   ARGV: me, pages_done, pages_total, channel, id → 'ok' | 'lost'
PROGRESS = (
    _OWNS
    + """
local job = KEYS[1]
local v = redis.call('HMGET', job, 'status', 'worker')
if v[1] ~= 'processing' or v[2] ~= ARGV[1] then return 'lost' end
redis.call('HSET', job, 'pages_done', ARGV[2], 'pages_total', ARGV[3])
event(ARGV[4], ARGV[5], 'processing', tonumber(ARGV[2]))
return 'ok'
"""
)

# KEYS: job, stream   ARGV: me, entry, group, status, field(result|error), value,
#                           finished_at, ttl_s, channel, id, pages_done
# Writes the outcome, drops the payload, ACKs and XDELs, publishes — only while this worker
# still owns the job. → 'ok' | 'lost'
FINISH = (
    _OWNS
    + """
local job, stream = KEYS[1], KEYS[2]
local me, entry, group = ARGV[1], ARGV[2], ARGV[3]
local v = redis.call('HMGET', job, 'status', 'worker')
local mine = owns(stream, group, entry, me)
if v[1] ~= 'processing' or v[2] ~= me then
  if mine then ack(stream, group, entry) end
  return 'lost'
end
if not mine then return 'lost' end
redis.call('HSET', job, 'status', ARGV[4], ARGV[5], ARGV[6], 'finished_at', ARGV[7],
  'pages_done', ARGV[11])
redis.call('HDEL', job, 'payload')
redis.call('EXPIRE', job, tonumber(ARGV[8]))
ack(stream, group, entry)
event(ARGV[9], ARGV[10], ARGV[4], tonumber(ARGV[11]))
return 'ok'
"""
)

# KEYS: stream   ARGV: me, entry, group → 1 when the idle time was reset
TOUCH = (
    _OWNS
    + """
if not owns(KEYS[1], ARGV[3], ARGV[2], ARGV[1]) then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[3], ARGV[1], 0, ARGV[2], 'JUSTID')
return 1
"""
)

# KEYS: job, stream   ARGV: me, entry, group, idle_ms, channel, id → 1 when released
# A draining worker hands back what it could not finish: the entry's idle time jumps past
# the visibility timeout (JUSTID: no extra delivery counted), so the next reclaim takes it.
RELEASE = (
    _OWNS
    + """
local job, stream = KEYS[1], KEYS[2]
local me, entry, group = ARGV[1], ARGV[2], ARGV[3]
local p = redis.call('XPENDING', stream, group, entry, entry, 1, me)
if #p == 0 then return 0 end
-- The next reclaim counts a delivery; a drain is not the job's fault, so take one off first.
local retries = math.max(0, tonumber(p[1][4]) - 1)
redis.call('XCLAIM', stream, group, me, 0, entry, 'IDLE', ARGV[4], 'RETRYCOUNT', retries, 'JUSTID')
local v = redis.call('HMGET', job, 'status', 'worker')
if v[1] == 'processing' and v[2] == me then
  redis.call('HSET', job, 'status', 'queued', 'worker', '')
  event(ARGV[5], ARGV[6], 'queued', 0)
end
return 1
"""
)

# KEYS: job, stream, dead   ARGV: me, entry, group, error_json, finished_at, ttl_s,
#                                 channel, id, lane, deliveries → 'ok' | 'lost'
POISON = (
    _OWNS
    + """
local job, stream, dead = KEYS[1], KEYS[2], KEYS[3]
local me, entry, group = ARGV[1], ARGV[2], ARGV[3]
if not owns(stream, group, entry, me) then return 'lost' end
local status = redis.call('HGET', job, 'status')
if status == 'queued' or status == 'processing' then
  redis.call('HSET', job, 'status', 'failed', 'error', ARGV[4], 'finished_at', ARGV[5])
  redis.call('HDEL', job, 'payload')
  redis.call('EXPIRE', job, tonumber(ARGV[6]))
  event(ARGV[7], ARGV[8], 'failed', 0)
  redis.call('XADD', dead, 'MAXLEN', '~', 10000, '*', 'id', ARGV[8], 'lane', ARGV[9],
    'entry', entry, 'deliveries', ARGV[10])
end
ack(stream, group, entry)
return 'ok'
"""
)

# KEYS: job   ARGV: tenant, error_json, finished_at, ttl_s, channel, id
# → 'cancelled' | 'deleted' | 'missing'
CANCEL = (
    _OWNS
    + """
local job = KEYS[1]
local v = redis.call('HMGET', job, 'status', 'tenant')
if not v[1] or v[2] ~= ARGV[1] then return 'missing' end
if v[1] == 'queued' or v[1] == 'processing' then
  redis.call('HSET', job, 'status', 'cancelled', 'error', ARGV[2], 'finished_at', ARGV[3])
  redis.call('HDEL', job, 'payload')
  redis.call('EXPIRE', job, tonumber(ARGV[4]))
  event(ARGV[5], ARGV[6], 'cancelled', 0)
  return 'cancelled'
end
redis.call('DEL', job)
return 'deleted'
"""
)
