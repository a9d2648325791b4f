-- POST /api/v1/collect/payments with a fresh Idempotency-Key, reference and
-- callback_url per request (`make soak`): every destination a client names is
-- one the server must not keep in memory once its deliveries are done.
local counter = 0
local thread_tag = "t"
local threads = 0

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
  thread_tag = tag .. "-" .. tid .. "-" .. os.time()
  math.randomseed(os.time() * 1000 + tid + (tonumber(tag) or 0) * 7919)
end

request = function()
  counter = counter + 1
  local body = string.format(
    '{"reference":"bench-%s-%d","amount":1500,"currency":"XOF","country":"BJ","operator":"mtn-bj","customer":{"phone":"+2290166001234"},"callback_url":"http://127.0.0.1:9/cb/%s/%d"}',
    thread_tag, counter, thread_tag, counter)
  wrk.headers["Idempotency-Key"] = uuid()
  wrk.headers["Content-Type"] = "application/json"
  return wrk.format("POST", "/api/v1/collect/payments", nil, body)
end
