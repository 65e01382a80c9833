-- A chunk ended (ran, skipped its units, or failed): it leaves `out`; its passes are set right
-- with the seconds it really took (what it was charged at release was an estimate) and the
-- batch's seconds per unit follow (EWMA); then the pool is topped up.
-- ARGV[4]: batch id, [5]: chunk id, [6]: seconds it took (< 0: not known), [7]: units it ran,
-- [8] and [9]: the key of a team's counts before and after its name (tasks/store_teams.py;
-- `-` names no team): the units it ran count for its batch's team in this same round trip.
-- Returns {the batch's team ('' none), the chunks released}.
local id, chunk = ARGV[4], ARGV[5]
local took, ran = tonumber(ARGV[6]), tonumber(ARGV[7])
local raw = redis.call('HGET', POOL .. 'batches', id)
local charged = redis.call('HGET', POOL .. 'out:' .. id, chunk)
if charged then
  redis.call('HDEL', POOL .. 'out:' .. id, chunk)  -- a second delivery's end changes nothing
end
if raw and charged and took >= 0 then
  local e = cjson.decode(raw)
  e.id = id
  local delta = took - cjson.decode(charged)[1]
  e.pass = e.pass + delta / e.w
  redis.call('HINCRBYFLOAT', POOL .. 'teams:' .. e.p, e.t, delta / e.tw)
  if ran > 0 then
    local each = took / ran
    if e.n == 0 then e.u = each else e.u = 0.7 * e.u + 0.3 * each end
    e.n = e.n + 1
  end
  store(e)
end
local team = redis.call('HGET', BATCH .. id, 'team') or ''
if ran > 0 then
  local name = team ~= '' and team or '-'
  redis.call('HINCRBY', ARGV[8] .. name .. ARGV[9], 'run', ran)
end
return {team, release(load())}
