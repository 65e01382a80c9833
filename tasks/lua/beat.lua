-- A chunk's heartbeat, stamped with Redis's clock (TIME), never the worker's: the watchdogs
-- that judge it run on other machines, whose clocks differ from the writer's.
-- KEYS[1]: the batch's beats hash; ARGV[1]: the chunk id. Returns the stamp.
local t = redis.call('TIME')
local now = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
redis.call('HSET', KEYS[1], ARGV[1], now)
return now
