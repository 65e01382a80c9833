-- Units' results, fenced: the first result of a unit stands, and nothing is stored once the
-- batch was reduced (done, incomplete, failed) or is gone. A unit that ran twice (a message
-- restored while its first worker still ran it, a worker whose clock or network lagged)
-- cannot change a stored result, nor a batch that ended (its board and report were made from
-- what was stored then). Only an infrastructure error gives way: it is no result of the
-- agent's, and a resubmission retries exactly those units. A cancelled batch still keeps what
-- its running units finish (no board is made from it; a resubmission reuses them).
-- KEYS: the batch, its units, logs, errors, infra. ARGV: per unit, four values: the unit id,
-- its result JSON, what it printed ('' nothing), flags ('e' an error, 'i' infrastructure).
-- Returns how many results were stored.
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'running' and status ~= 'cancelled' then return 0 end
local stored = 0
for i = 1, #ARGV, 4 do
  local id, flags = ARGV[i], ARGV[i + 3]
  if redis.call('HEXISTS', KEYS[2], id) == 0 or redis.call('SISMEMBER', KEYS[5], id) == 1 then
    redis.call('HSET', KEYS[2], id, ARGV[i + 1])
    if ARGV[i + 2] ~= '' then
      redis.call('HSET', KEYS[3], id, ARGV[i + 2])
    else
      redis.call('HDEL', KEYS[3], id)
    end
    if string.find(flags, 'e', 1, true) then
      redis.call('SADD', KEYS[4], id)
    else
      redis.call('SREM', KEYS[4], id)
    end
    if string.find(flags, 'i', 1, true) then
      redis.call('SADD', KEYS[5], id)
    else
      redis.call('SREM', KEYS[5], id)
    end
    stored = stored + 1
  end
end
return stored
