-- POST /api/v1/collect/payments with a fresh Idempotency-Key and reference per request.
-- `wrk ... -- TAG [OPERATOR COUNTRY PHONE]`: mtn-bj, BJ, +2290166001234 by default.
local counter = 0
local thread_tag = "t"
local threads = 0
local operator, country, phone = "mtn-bj", "BJ", "+2290166001234"

-- Each thread gets its own id: unseeded, every thread's Lua state draws the same numbers.
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

local function uuid()
  local t = "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx"
  return (string.gsub(t, "[xy]", function(c)
    local v = (c == "x") and math.random(0, 15) or math.random(8, 11)
    return string.format("%x", v)
  end))
end

-- `wrk ... -- TAG`: several wrk processes started in the same second (one per
-- node of a fleet) need different keys and references, or they replay each other.
function init(args)
  local tag = args[1] or "0"
  operator = args[2] or operator
  country = args[3] or country
  phone = args[4] or phone
  thread_tag = tag .. "-" .. tid .. "-" .. os.time()
  math.randomseed(os.time() * 1000 + tid + (tonumber(tag) or 0) * 7919)
end

request = function()
  counter = counter + 1
  local body = string.format(
    '{"reference":"bench-%s-%d","amount":1500,"currency":"XOF","country":"%s","operator":"%s","customer":{"phone":"%s"}}',
    thread_tag, counter, country, operator, phone)
  wrk.headers["Idempotency-Key"] = uuid()
  wrk.headers["Content-Type"] = "application/json"
  return wrk.format("POST", "/api/v1/collect/payments", nil, body)
end
