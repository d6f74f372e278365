-- wrk script for logpond's bench (bench/wrk.ts writes the files and parses the last line).
--   wrk -t1 -c64 -d8s -s bench/wrk.lua <url> -- <dir> <bodies> <tokens>
-- <dir> holds body-<i>.bin (1..bodies), headers.txt (extra header lines: Content-Type, and
-- Content-Encoding when set) and tokens.txt (one per line). Each thread pre-builds its requests
-- (request i: body i, token i, cycling) so request() only returns a ready string. Statuses are
-- counted per thread in response() and summed in done() through thread:get (each thread has its
-- own Lua state; setup() keeps the thread handles for that).
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local data = f:read("*a")
  f:close()
  return data
end

function init(args)
  local dir, nbodies = args[1], tonumber(args[2])
  local headers = {}
  for line in slurp(dir .. "/headers.txt"):gmatch("[^\n]+") do
    local name, value = line:match("^([^:]+):%s*(.*)$")
    headers[name] = value
  end
  local tokens = {}
  for line in slurp(dir .. "/tokens.txt"):gmatch("[^\n]+") do table.insert(tokens, line) end
  local bodies = {}
  for i = 1, nbodies do bodies[i] = slurp(dir .. "/body-" .. i .. ".bin") end
  requests = {}
  local n = math.max(#bodies, #tokens)
  for i = 1, n do
    headers["Authorization"] = "Bearer " .. tokens[(i - 1) % #tokens + 1]
    requests[i] = wrk.format("POST", nil, headers, bodies[(i - 1) % #bodies + 1])
  end
  next_request = 0
  statuses = {}
end

function request()
  next_request = next_request % #requests + 1
  return requests[next_request]
end

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local totals = {}
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("statuses")) do totals[status] = (totals[status] or 0) + n end
  end
  local parts = {}
  for status, n in pairs(totals) do table.insert(parts, string.format('"%d":%d', status, n)) end
  local e = summary.errors
  io.write(string.format(
    'WRK-RESULT {"requests":%d,"durationUs":%d,"statuses":{%s},"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},"p50Us":%d,"p99Us":%d}\n',
    summary.requests, summary.duration, table.concat(parts, ","), e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
