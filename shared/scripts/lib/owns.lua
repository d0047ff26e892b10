-- owns(stream, group, entry, consumer): is the entry pending to that consumer in the group?
local function owns(stream, group, entry, me)
  local p = redis.call('XPENDING', stream, group, entry, entry, 1, me)
  return #p == 1
end
