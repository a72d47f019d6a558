-- wrk script: A2A 1.0 JSON-RPC SendMessage with a never-repeated messageId per request.
--
-- A reply counts as good only when it is HTTP 200, carries no JSON-RPC "error" member and
-- shows the task COMPLETED; everything else is counted (and the first one kept) so that a
-- fast failure can never pass for throughput.
--
-- Environment:
--   BENCH_RUN_ID   unique per wrk invocation (required in practice: our server deduplicates
--                  on messageId, so ids must never repeat across warm-up and measured runs)
--   BENCH_TEXT     message text (default "hello")
--   BENCH_OUT      file for the one-line JSON summary
--   BENCH_PORTS    "P1 P2 …": thread i talks to 127.0.0.1:P(i) in turn (replicas behind a
--                  simple round-robin); empty: the URL's port
--   BENCH_TOKEN    a bearer token sent on every request (Authorization: Bearer); empty: none

local run_id = os.getenv("BENCH_RUN_ID") or tostring(os.time())
local text = os.getenv("BENCH_TEXT") or "hello"
local out_file = os.getenv("BENCH_OUT")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["A2A-Version"] = "1.0"
local token = os.getenv("BENCH_TOKEN") or ""
if token ~= "" then wrk.headers["Authorization"] = "Bearer " .. token end

local all_threads = {}
local next_tid = 0

local ports = {}
for port in (os.getenv("BENCH_PORTS") or ""):gmatch("%d+") do ports[#ports + 1] = port end

function setup(thread)
  next_tid = next_tid + 1
  thread:set("tid", next_tid)
  if #ports > 0 then
    thread.addr = wrk.lookup("127.0.0.1", ports[(next_tid - 1) % #ports + 1])[1]
  end
  all_threads[#all_threads + 1] = thread
end

-- per-thread counters are globals on purpose: done() reads them with thread:get(), which
-- sees only globals (a `local` here would always read back as nil, i.e. zero errors)
seq, sent, good, bad_http, bad_rpc, bad_state, first_bad = 0, 0, 0, 0, 0, 0, nil

function init(args)
  seq, sent, good, bad_http, bad_rpc, bad_state = 0, 0, 0, 0, 0, 0
end

function request()
  seq = seq + 1
  sent = sent + 1
  local id = run_id .. "-" .. tostring(tid) .. "-" .. seq
  local body = '{"jsonrpc":"2.0","id":"' .. id .. '","method":"SendMessage","params":' ..
    '{"message":{"messageId":"msg-' .. id .. '","role":"ROLE_USER","parts":[{"text":"' ..
    text .. '"}]}}}'
  return wrk.format(nil, nil, nil, body)
end

local function remember(what)
  if not first_bad then first_bad = what:sub(1, 240) end
end

function response(status, headers, body)
  body = body or ""
  if status ~= 200 then
    bad_http = bad_http + 1
    remember("HTTP " .. status .. " " .. body)
  elseif body:find('"error"', 1, true) then
    bad_rpc = bad_rpc + 1
    remember(body)
  elseif not body:find("TASK_STATE_COMPLETED", 1, true) then
    bad_state = bad_state + 1
    remember(body)
  else
    good = good + 1
  end
end

local function quote(s)
  s = tostring(s):gsub("\\", "\\\\"):gsub('"', '\\"'):gsub("[%c]", " ")
  return '"' .. s .. '"'
end

function done(summary, latency, requests)
  local g, h, r, s, sample = 0, 0, 0, 0, nil
  for _, t in ipairs(all_threads) do
    g = g + (t:get("good") or 0)
    h = h + (t:get("bad_http") or 0)
    r = r + (t:get("bad_rpc") or 0)
    s = s + (t:get("bad_state") or 0)
    sample = sample or t:get("first_bad")
  end
  local e = summary.errors
  local secs = summary.duration / 1e6
  -- wrk counts HTTP >= 400 in errors.status as well; that is already in bad_http
  local sock = e.connect + e.read + e.write + e.timeout
  local json = string.format(
    '{"requests":%d,"good":%d,"seconds":%.3f,"rps":%.1f,"good_rps":%.1f,' ..
    '"p50_ms":%.4f,"p90_ms":%.4f,"p99_ms":%.4f,"max_ms":%.3f,"mean_ms":%.4f,' ..
    '"socket_errors":%d,"timeouts":%d,"http_errors":%d,"rpc_errors":%d,"not_completed":%d,' ..
    '"errors":%d,"first_bad":%s}',
    summary.requests, g, secs, summary.requests / secs, g / secs,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000, latency.mean / 1000,
    sock, e.timeout, h, r, s, sock + h + r + s, sample and quote(sample) or "null")
  io.write("BENCH_JSON " .. json .. "\n")
  if out_file and out_file ~= "" then
    local f = assert(io.open(out_file, "w"))
    f:write(json .. "\n")
    f:close()
  end
end
