-- The pool's scheduler, shared by every script in this folder (tasks/store_sharing.py puts
-- this file before each of them). ARGV[1]: the pool's key root (`{prefix}pool:{queue}:`),
-- ARGV[2]: the batches' key root (`{prefix}batch:`), ARGV[3]: the queue headroom.
-- Keys are built from these roots (tasks/keys.py names them): a plain Redis or a replicated
-- primary, never a Redis Cluster. Times are Redis's own (TIME), never a worker's.
local POOL, BATCH, HEADROOM = ARGV[1], ARGV[2], tonumber(ARGV[3])
local RANK = {interactive = 1, scheduled = 2, bulk = 3}

local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1e6
end

local function leave(id)
  redis.call('DEL', POOL .. 'waiting:' .. id, POOL .. 'out:' .. id)
  redis.call('HDEL', POOL .. 'batches', id)
end

-- The pool's running batches with their counts; a batch that ended leaves here (a cancelled
-- batch publishes nothing more, whoever cancelled it).
local function load()
  local raw = redis.call('HGETALL', POOL .. 'batches')
  local list = {}
  for i = 1, #raw, 2 do
    local id = raw[i]
    if redis.call('HGET', BATCH .. id, 'status') ~= 'running' then
      leave(id)
    else
      local e = cjson.decode(raw[i + 1])
      e.id = id
      e.waiting = redis.call('LLEN', POOL .. 'waiting:' .. id)
      e.out = redis.call('HLEN', POOL .. 'out:' .. id)
      list[#list + 1] = e
    end
  end
  return list
end

local function store(e)
  local kept = {p = e.p, t = e.t, tw = e.tw, w = e.w, u = e.u, n = e.n, cs = e.cs,
                pass = e.pass, seq = e.seq, wu = e.wu}
  redis.call('HSET', POOL .. 'batches', e.id, cjson.encode(kept))
end

local function team_pass(e)
  return tonumber(redis.call('HGET', POOL .. 'teams:' .. e.p, e.t) or 0)
end

-- Seconds charged for the batch's chunks still out: estimates, set right as each ends. A pass
-- less these is what the batch's ended chunks really cost (its settled pass).
local function in_flight(e)
  local total = 0
  for _, charged in ipairs(redis.call('HVALS', POOL .. 'out:' .. e.id)) do
    total = total + cjson.decode(charged)[1]
  end
  return total
end

-- Live worker processes of the pool (registrations not lapsed on Redis's clock).
local function slots()
  local t = now()
  local gone = redis.call('ZRANGEBYSCORE', POOL .. 'slots', '-inf', t)
  if #gone > 0 then
    redis.call('ZREM', POOL .. 'slots', unpack(gone))
    redis.call('HDEL', POOL .. 'slot_counts', unpack(gone))
  end
  local total = 0
  for _, node in ipairs(redis.call('ZRANGEBYSCORE', POOL .. 'slots', '(' .. t, '+inf')) do
    total = total + tonumber(redis.call('HGET', POOL .. 'slot_counts', node) or 0)
  end
  return total
end

-- a goes before b: higher class, then lower team pass, then lower batch pass, then arrival.
local function before(a, ta, b, tb)
  if RANK[a.p] ~= RANK[b.p] then return RANK[a.p] < RANK[b.p] end
  if a.t ~= b.t and ta ~= tb then return ta < tb end
  if a.pass ~= b.pass then return a.pass < b.pass end
  return a.seq < b.seq
end

-- `{pool}backlog` is a list as long as the pool's chunks waiting here, kept so by every script:
-- what an autoscaler that reads a list's length (KEDA's redis scaler) and arena_queue_depth see
-- of the work the broker does not hold yet (its entries are only counted, never read).
local function mirror_backlog(list)
  local waiting = 0
  for _, e in ipairs(list) do waiting = waiting + e.waiting end
  local key = POOL .. 'backlog'
  local have = redis.call('LLEN', key)
  if waiting == 0 then
    redis.call('DEL', key)
  elseif have > waiting then
    redis.call('LTRIM', key, 0, waiting - 1)
  end
  while have < waiting do
    local push = {}
    for i = 1, math.min(waiting - have, 1000) do push[i] = '1' end
    redis.call('RPUSH', key, unpack(push))
    have = have + #push
  end
end

-- Give the broker chunks while the pool's out is below its capacity; returns them (the raw
-- JSON [chunk id, [units]]) for the caller to publish.
local function release(list)
  local capacity = math.max(1, slots() + HEADROOM)
  local out = 0
  for _, e in ipairs(list) do out = out + e.out end
  local popped, changed, t = {}, {}, now()
  while out < capacity do
    local best, best_tp
    for _, e in ipairs(list) do
      if e.waiting > 0 then
        local tp = team_pass(e)
        if not best or before(e, tp, best, best_tp) then best, best_tp = e, tp end
      end
    end
    if not best then break end
    local raw = redis.call('LPOP', POOL .. 'waiting:' .. best.id)
    local chunk = cjson.decode(raw)
    local units = #chunk[2]
    local cost = best.u * units
    redis.call('HSET', POOL .. 'out:' .. best.id, chunk[1], cjson.encode({cost, t}))
    redis.call('HINCRBYFLOAT', POOL .. 'teams:' .. best.p, best.t, cost / best.tw)
    best.pass = best.pass + cost / best.w
    best.wu = math.max(0, best.wu - units)
    best.waiting, best.out, out = best.waiting - 1, best.out + 1, out + 1
    changed[best.id] = best
    popped[#popped + 1] = raw
  end
  for _, e in pairs(changed) do store(e) end
  mirror_backlog(list)
  return popped
end
