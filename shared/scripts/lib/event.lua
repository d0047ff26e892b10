-- event(channel, id, status, pages_done): publish a JobEvent (shared/record.py).
local function event(channel, id, status, pages_done)
  redis.call('PUBLISH', channel, cjson.encode({id=id, status=status, pages_done=pages_done}))
end
