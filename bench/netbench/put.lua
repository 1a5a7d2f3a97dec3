local body = string.rep("x", 1024)
local reqs = {}
local n = 0
init = function(args)
  for i = 0, 63 do
    reqs[i] = wrk.format("PUT", "/k/" .. i, nil, body)
  end
end
request = function()
  n = (n + 1) % 64
  return reqs[n]
end
