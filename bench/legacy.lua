-- POST /api/v1/collect/mobile-money/ (legacy generation), fresh reference per request.
local counter = 0
local thread_tag = "t"
local threads = 0

-- Each thread gets its own id: unseeded, every thread's Lua state draws the same numbers.
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

function init(args)
  thread_tag = tid .. "-" .. os.time()
end

request = function()
  counter = counter + 1
  local body = string.format(
    '{"amount":150000,"phone":"+2290166001234","country":"BJ","operator":"mtn-bj","reference":"lbench-%s-%d"}',
    thread_tag, counter)
  wrk.headers["Content-Type"] = "application/json"
  return wrk.format("POST", "/api/v1/collect/mobile-money/", nil, body)
end
