-- POST /api/v1/collect/mobile-money/ (legacy generation), fresh reference per request.
local counter = 0
local thread_tag = tostring(math.random(1, 1e9))

request = function()
  counter = counter + 1
  local body = string.format(
    '{"amount":150000,"phone":"+2290166001234","country":"BJ","operator":"mtn-bj","reference":"lbench-%s-%d"}',
    thread_tag, counter)
  wrk.headers["Content-Type"] = "application/json"
  return wrk.format("POST", "/api/v1/collect/mobile-money/", nil, body)
end
