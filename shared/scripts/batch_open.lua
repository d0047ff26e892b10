-- batch_open: (none) → an open batch. Caller: producer (POST /v1/batches), before the first
-- document is read. Jobs join it with enqueue; batch_seal closes the list.
-- The batch lives from here on: a TTL (the result TTL, at least twice the open deadline)
-- and an entry in the partition's open batches, scored by the time past which no request
-- can still be reading it; the sweeper seals a batch still open then (its producer died).
-- KEYS: batch, idem (an unused key of the batch's slot when none), open_batches
-- ARGV: batch_id, idem_ttl_s (0: no Idempotency-Key), ttl_s, deadline_ms, field1, value1, ...
-- Reply: {'ok', id} | {'dup', prior_id} (an Idempotency-Key already names a batch)
-- Needs: (nothing)
local batch, idem = KEYS[1], KEYS[2]
local keyed = tonumber(ARGV[2]) > 0
if keyed then
  local prior = redis.call('GET', idem)
  if prior then return {'dup', prior} end
end
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', batch, 'id', ARGV[1], 'total', 0, 'done', 0, 'failed', 0, 'cancelled', 0,
  'sealed', 0, unpack(fields))
redis.call('EXPIRE', batch, tonumber(ARGV[3]))
redis.call('ZADD', KEYS[3], tonumber(ARGV[4]), ARGV[1])
if keyed then redis.call('SET', idem, ARGV[1], 'EX', tonumber(ARGV[2])) end
return {'ok', ARGV[1]}
