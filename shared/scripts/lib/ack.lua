-- ack(stream, group, entry): the entry is done with: acknowledge it and delete it.
local function ack(stream, group, entry)
  redis.call('XACK', stream, group, entry)
  redis.call('XDEL', stream, entry)
end
