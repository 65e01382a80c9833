-- A worker node says how many processes consume this pool (at start, then every watchdog
-- sweep); the registration lapses `ttl` seconds later on Redis's clock unless renewed. Then
-- the pool is topped up (its capacity may have grown).
-- ARGV[4]: the node's name, [5]: its processes (0: it leaves), [6]: ttl in seconds.
if tonumber(ARGV[5]) > 0 then
  redis.call('ZADD', POOL .. 'slots', now() + tonumber(ARGV[6]), ARGV[4])
  redis.call('HSET', POOL .. 'slot_counts', ARGV[4], ARGV[5])
  return release(load())
end
redis.call('ZREM', POOL .. 'slots', ARGV[4])
redis.call('HDEL', POOL .. 'slot_counts', ARGV[4])
return {}
