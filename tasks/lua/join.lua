-- A batch joins the pool (its waiting list is already filled), then the pool is topped up.
-- ARGV[4]: batch id, [5]: class, [6]: team ('' none), [7]: team weight, [8]: batch weight,
-- [9]: seconds per unit assumed, [10]: chunk size, [11]: units waiting.
-- A batch already in the pool (chunks sent again by the watchdog) keeps its share. A team or
-- batch that (re)joins starts at the lowest settled pass of the active ones (what their ended
-- chunks cost, not the estimates of those still out: a first batch's estimates, 1 s a unit
-- before any ended, kept a newcomer behind it until it had run that much): no banked credit.
local id = ARGV[4]
local list = load()
local entry
for _, e in ipairs(list) do if e.id == id then entry = e end end
if entry then
  entry.wu = entry.wu + tonumber(ARGV[11])
  store(entry)
else
  entry = {id = id, p = ARGV[5], t = ARGV[6], tw = tonumber(ARGV[7]), w = tonumber(ARGV[8]),
           u = tonumber(ARGV[9]), n = 0, cs = tonumber(ARGV[10]), seq = now(),
           wu = tonumber(ARGV[11])}
  local team_active, team_min, batch_min, team_flight = false, nil, nil, {}
  for _, e in ipairs(list) do
    if e.p == entry.p and (e.waiting > 0 or e.out > 0) then
      local flight = in_flight(e)
      team_flight[e.t] = (team_flight[e.t] or 0) + flight / e.tw
      if e.t == entry.t then
        team_active = true
        local settled = e.pass - flight / e.w
        if not batch_min or settled < batch_min then batch_min = settled end
      end
    end
  end
  for _, e in ipairs(list) do
    if e.p == entry.p and (e.waiting > 0 or e.out > 0) then
      local settled = team_pass(e) - team_flight[e.t]
      if not team_min or settled < team_min then team_min = settled end
    end
  end
  if not team_active then
    redis.call('HSET', POOL .. 'teams:' .. entry.p, entry.t, team_min or 0)
  end
  entry.pass = batch_min or 0
  entry.waiting = redis.call('LLEN', POOL .. 'waiting:' .. id)
  entry.out = redis.call('HLEN', POOL .. 'out:' .. id)
  store(entry)
  list[#list + 1] = entry
end
return release(list)
