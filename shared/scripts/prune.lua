-- prune: no job transition. Removes the group's consumers that own no entry and have not
-- been seen for ARGV[2] ms: workers gone for good (a consumer per pod name would pile up
-- for ever). Checked and removed in one step, so no entry can become pending meanwhile; a
-- worker that comes back is re-created by its next read.
-- Caller: worker, at reclaim time.
-- KEYS: stream
-- ARGV: group, min_idle_ms, me
-- Reply: the number of consumers removed
-- Needs: (nothing)
local removed = 0
for _, consumer in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local f = {}
  for i = 1, #consumer, 2 do f[consumer[i]] = consumer[i + 1] end
  if f['name'] ~= ARGV[3] and tonumber(f['pending']) == 0
      and tonumber(f['idle']) > tonumber(ARGV[2]) then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], f['name'])
    removed = removed + 1
  end
end
return removed
