-- touch: no transition; the heartbeat. Caller: the worker that owns the entry.
-- Resets the entry's idle time so that no reclaim takes a job that is still running.
-- KEYS: stream
-- ARGV: me, entry, group
-- Reply: 1 when the idle time was reset, 0 when the entry is no longer this worker's
-- Needs: owns
if not owns(KEYS[1], ARGV[3], ARGV[2], ARGV[1]) then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[3], ARGV[1], 0, ARGV[2], 'JUSTID')
return 1
