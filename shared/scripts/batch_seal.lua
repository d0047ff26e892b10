-- batch_seal: open → sealed (every document has been read), and finished at once when every
-- job already ended. Caller: producer, at the end of POST /v1/batches (also when it failed
-- part way: what was accepted stays a batch), mode 'read'; and its sweeper, mode 'sweep',
-- for a batch still open past its deadline (its producer died): its jobs run on, and the
-- rest of the request, never read, is one refused entry (code unavailable) at the index
-- where reading stopped.
-- A sealed batch lives until its last job ends (no TTL), then the result TTL (close_batch).
-- KEYS: batch, batch_jobs, webhooks, open_batches
-- ARGV: channel, now_ms, ttl_s, rejected_json (mode read), batch_id, mode ('read' | 'sweep')
-- Reply: 1 when the batch finished now, 0 when sealed, -1 when there was nothing to seal
-- (sweep of a batch sealed or gone meanwhile)
-- Needs: close_batch
local batch, jobs = KEYS[1], KEYS[2]
redis.call('ZREM', KEYS[4], ARGV[5])
local rejected = ARGV[4]
if ARGV[6] == 'sweep' then
  local b = redis.call('HMGET', batch, 'sealed', 'total')
  if b[1] ~= '0' then return -1 end
  rejected = cjson.encode({{index=tonumber(b[2] or 0), filename=cjson.null, id=cjson.null,
    code='unavailable', message='the producer stopped before the rest of the request was '
      .. 'read: the documents accepted before it run, nothing after them was received'}})
elseif redis.call('EXISTS', batch) == 0 then
  return -1  -- deleted meanwhile (a batch of which nothing was accepted)
end
redis.call('HSET', batch, 'sealed', 1, 'rejected', rejected)
redis.call('PERSIST', batch)
redis.call('PERSIST', jobs)
if close_batch(batch, jobs, KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3])) then return 1 end
redis.call('PUBLISH', ARGV[1], cjson.encode({id=ARGV[5], status='sealed', pages_done=0}))
return 0
