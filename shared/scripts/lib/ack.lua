-- ack(stream, group, entry, taken): the entry is done with: acknowledge it, delete it, and
-- forget the job a fair-share ticket was given (take.lua).
local function ack(stream, group, entry, taken)
  redis.call('XACK', stream, group, entry)
  redis.call('XDEL', stream, entry)
  redis.call('HDEL', taken, entry)
end
