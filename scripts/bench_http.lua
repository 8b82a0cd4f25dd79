-- wrk script of scripts/bench_http.py: replays the requests of a file, one a line,
--   METHOD <tab> PATH <tab> AUTHORIZATION (or empty) <tab> JSON BODY (or empty)
-- Thread t of n sends lines t, t+n, t+2n, ... (wrapping), so a list of one-shot requests (a handoff's
-- accept) is not sent twice while it lasts. "__UNIQ__" in a path or body becomes a value unique in
-- the run (external_id, email). done() prints one parseable line: BENCH_RESULT {json}.
-- usage: wrk ... -s bench_http.lua http://127.0.0.1:PORT -- REQUEST_FILE THREADS RUN_ID

local next_tid = 0

function setup(thread)
  thread:set("tid", next_tid)
  next_tid = next_tid + 1
end

local requests = {}
local counter = 0
local nthreads = 1
local run_id = "run"

function init(args)
  nthreads = tonumber(args[2])
  run_id = args[3]
  for line in io.lines(args[1]) do
    local method, path, auth, body = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
    if method then
      local headers = {}
      if auth ~= "" then headers["Authorization"] = auth end
      if body ~= "" then headers["Content-Type"] = "application/json" else body = nil end
      requests[#requests + 1] = { method = method, path = path, headers = headers, body = body }
    end
  end
end

function request()
  local r = requests[((tid + counter * nthreads) % #requests) + 1]
  counter = counter + 1
  local uniq = run_id .. "-" .. tid .. "-" .. counter
  local path = (r.path:gsub("__UNIQ__", uniq))
  local body = r.body and (r.body:gsub("__UNIQ__", uniq)) or nil
  return wrk.format(r.method, path, r.headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests": %d, "duration_us": %d, "bytes": %d, "non2xx": %d, "connect_errors": %d, ' ..
    '"read_errors": %d, "write_errors": %d, "timeouts": %d, "p50_us": %d, "p90_us": %d, "p95_us": %d, ' ..
    '"p99_us": %d, ' ..
    '"max_us": %d, "mean_us": %.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.status, e.connect, e.read, e.write, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(95), latency:percentile(99), latency.max, latency.mean))
end
