-- batch_open: (none) → an open batch. Caller: producer (POST /v1/batches), before the first
-- document is read. Jobs join it with enqueue; batch_seal closes the list.
-- KEYS: batch, idem ('' when none)
-- ARGV: batch_id, idem_ttl_s, field1, value1, ...
-- Reply: {'ok', id} | {'dup', prior_id} (an Idempotency-Key already names a batch)
-- Needs: (nothing)
local batch, idem = KEYS[1], KEYS[2]
if idem ~= '' then
  local prior = redis.call('GET', idem)
  if prior then return {'dup', prior} end
end
local fields = {}
for i = 3, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', batch, 'id', ARGV[1], 'total', 0, 'done', 0, 'failed', 0, 'cancelled', 0,
  'sealed', 0, unpack(fields))
if idem ~= '' then redis.call('SET', idem, ARGV[1], 'EX', tonumber(ARGV[2])) end
return {'ok', ARGV[1]}
