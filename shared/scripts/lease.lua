-- lease: no transition; one process of the stack holds a named lease at a time (the
-- object-store sweeper's). Caller: a worker. A hash, not SET NX: workers send no SET.
-- KEYS: lease
-- ARGV: me, ttl_ms
-- Reply: 1 when the lease is now this caller's, 0 when another holds it
-- Needs: (nothing)
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return 1
