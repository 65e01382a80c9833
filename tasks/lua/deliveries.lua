-- When each unacknowledged message was first seen by a watchdog, on Redis's clock. Kombu
-- stamps a delivery with the delivering worker's own clock (its `unacked_index` score), which
-- another machine cannot judge; this stamp is the first sweep that saw the message, so a
-- delivery counts as old at most one sweep late and never early.
-- KEYS[1]: kombu's unacked index (sorted set); KEYS[2]: our hash, delivery tag -> first seen.
-- Returns {now, tag, seen, tag, seen, ...}; tags no longer delivered leave the hash.
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
local reply, live = {now}, {}
for _, tag in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  live[tag] = true
  redis.call('HSETNX', KEYS[2], tag, now)
  reply[#reply + 1] = tag
  reply[#reply + 1] = redis.call('HGET', KEYS[2], tag)
end
for _, tag in ipairs(redis.call('HKEYS', KEYS[2])) do
  if not live[tag] then redis.call('HDEL', KEYS[2], tag) end
end
return reply
