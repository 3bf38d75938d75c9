#!/usr/bin/env python3
"""Restart loop on real needled processes: N peers on loopback (the first
founds the mesh, the others join it), six clients submitting keyed tasks
(echo, sleep up to 300 ms, and parallel groups) through random live peers,
and one peer at a time killed with SIGKILL (or stopped with SIGTERM,
which drains it first: a rolling restart) and started again on its data
dir every 3-8 s. After each restart it waits for the peer's /healthz (120 s
at most; longer, and it saves every peer's goroutines as stuck*.txt). At
the end every acknowledged task or group must be SUCCEEDED, and a key
retried after an error must have kept its id; the check goes on while
the backlog drains, until a minute passes without progress. It counts the
submissions a live peer answered with an HTTP error status (503 while a
partition has no owner, 429), which the clients retry. Exits 4, with
the peers left running, when something is unfinished.

    python3 bench/chaos/restart.py ./bin/needled 4 300 1 /tmp/chaos [kill|term][:K]
    #                              needled       peers seconds seed dir

kill:2 kills two peers at once (K peers, fewer than N): with three
replicas some partitions lose their majority until the peers are back.

Uses ports 7300+i (HTTP) and 4300+i (libp2p). Python 3 standard library only.
"""
import json, os, random, signal, subprocess, sys, threading, time, urllib.request, urllib.error
MODE = (sys.argv[6:] or ["kill"])[0].partition(":")
if len(sys.argv) not in (6, 7) or MODE[0] not in ("kill", "term") or MODE[2] not in ("", "1", "2", "3"):
    sys.exit(__doc__)
BIN = sys.argv[1]; N = int(sys.argv[2]); DUR = float(sys.argv[3]); SEED = int(sys.argv[4]); ROOT = sys.argv[5]
SIG = signal.SIGTERM if MODE[0] == "term" else signal.SIGKILL
AT_ONCE = int(MODE[2] or 1)  # peers stopped together
if AT_ONCE >= N: sys.exit("stopping every peer at once leaves nobody to submit to")
rnd = random.Random(SEED)
os.makedirs(ROOT, exist_ok=True)
procs = {}
def start(i):
    args = [BIN, "--data", f"{ROOT}/d{i}", "--http", f"127.0.0.1:{7300+i}", "--listen", f"/ip4/127.0.0.1/tcp/{4300+i}"]
    if i > 0: args += ["--join", "127.0.0.1:4300"]
    procs[i] = subprocess.Popen(args, stdout=open(f"{ROOT}/log{i}", "a"), stderr=subprocess.STDOUT)
def call(i, method, path, body=None, timeout=5):
    req = urllib.request.Request(f"http://127.0.0.1:{7300+i}{path}", method=method, data=None if body is None else json.dumps(body).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r: return json.loads(r.read())
def healthy(i):
    try: call(i, "GET", "/healthz", timeout=1); return True
    except Exception: return False
for i in range(N):
    start(i)
    while not healthy(i): time.sleep(0.1)
time.sleep(2)
down = set(); lock = threading.Lock(); stop = False
acked = {}  # key -> id
retried = {}  # HTTP status -> submissions answered with it, then retried
errors = []
def submitter(w):
    n = 0
    while not stop:
        n += 1; key = f"k{w}-{n}"
        h = rnd.choice(["echo", "sleep"])
        body = {"handler": h, "key": key, "payload": {"ms": rnd.randint(0, 300)} if h == "sleep" else {"n": n}}
        if rnd.random() < 0.2:
            body = {"mode": "parallel", "tasks": [{"handler": "echo", "payload": {"i": j}} for j in range(rnd.randint(2, 5))], "key": key}
        t0 = time.time(); tid = None
        while tid is None and time.time() - t0 < 60:
            with lock: live = [i for i in range(N) if i not in down]
            i = rnd.choice(live)
            try:
                r = call(i, "POST", "/v1/groups" if "tasks" in body else "/v1/tasks", body)
                tid = r.get("id") or r.get("group")
                if "tasks" in body: tid = ("G", r["id"] if "id" in r else r["group"])
            except urllib.error.HTTPError as e:
                msg = e.read()[:200]
                if e.code < 500 and e.code not in (409, 429): errors.append((key, e.code, msg)); break
                with lock: retried[e.code] = retried.get(e.code, 0) + 1
                time.sleep(0.2)
            except Exception:
                time.sleep(0.2)
        if tid is None: errors.append((key, "never acked")); continue
        if key in acked and acked[key] != tid: errors.append((key, "id changed", acked[key], tid))
        acked[key] = tid
def chaos():
    end = time.time() + DUR
    while time.time() < end:
        time.sleep(rnd.uniform(3, 8))
        group = rnd.sample(range(N), AT_ONCE)
        with lock: down.update(group)
        t0 = time.time()
        for i in group: procs[i].send_signal(SIG)
        for i in group:
            procs[i].wait()
            print(f"{time.strftime('%X')} {'killed' if SIG == signal.SIGKILL else 'stopped'} {i} after {time.time()-t0:.1f}s, exit {procs[i].returncode}", flush=True)
        time.sleep(rnd.uniform(0.5, 3))
        for i in group: start(i)
        for i in group: wait_healthy(i)
def wait_healthy(i):
    t0 = time.time(); last = None; ok = False
    while time.time() - t0 < 120:
        try:
            call(i, "GET", "/healthz", timeout=1); ok = True; break
        except urllib.error.HTTPError as e:
            msg = e.read()[:160].decode(errors="replace")
            if msg != last: print(f"   +{time.time()-t0:5.1f}s {i}: {msg}", flush=True); last = msg
        except Exception as e:
            pass
        time.sleep(0.25)
    print(f"{time.strftime('%X')} restarted {i} healthy={ok} after {time.time()-t0:.1f}s", flush=True)
    if not ok:
        for j in range(N):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{7300+j}/debug/pprof/goroutine?debug=2", timeout=5) as r: open(f"{ROOT}/stuck{j}-{i}.txt", "wb").write(r.read())
            except Exception as e: print("dump", j, e)
        print("STUCK", i, flush=True); os._exit(3)
    with lock: down.discard(i)
ths = [threading.Thread(target=submitter, args=(w,)) for w in range(6)]
for t in ths: t.start()
chaos()
stop = True
for t in ths: t.join()
print("acked", len(acked), "errors", len(errors), errors[:5], flush=True)
print("retried after an HTTP status (a live peer's answer):", dict(sorted(retried.items())), flush=True)
# every acked task/group must finish
from concurrent.futures import ThreadPoolExecutor
def state(item):
    key, tid = item
    for attempt in range(3):
        i = random.randrange(N)
        try:
            if isinstance(tid, tuple):
                r = call(i, "GET", f"/v1/groups/{tid[1]}?tasks=false")
            else:
                r = call(i, "GET", f"/v1/tasks/{tid}")
            return key, r.get("state"), r
        except Exception as e:
            err = str(e)
    return key, "err " + err, None
pending = dict(acked); progress = time.time(); final = {}
while pending and time.time() - progress < 60:
    with ThreadPoolExecutor(8) as ex:
        for key, st, r in ex.map(state, list(pending.items())):
            if st in ("SUCCEEDED", "FAILED", "CANCELED"):
                final[key] = (st, r); del pending[key]; progress = time.time()
    print(f"check: {len(final)} terminal, {len(pending)} pending", flush=True)
    if pending: time.sleep(2)
bad = {k: v for k, v in final.items() if v[0] != "SUCCEEDED"}
print("unfinished", len(pending), list(pending.items())[:5])
if pending:
    with ThreadPoolExecutor(8) as ex:
        for key, st, r in list(ex.map(state, list(pending.items())[:10])):
            print("  pending", key, pending[key], st, json.dumps(r)[:300] if r else "")
    json.dump({k: (v if isinstance(v, str) else list(v)) for k, v in pending.items()}, open(f"{ROOT}/pending.json", "w"))
print("not succeeded", len(bad), [(k, v[0], (v[1] or {}).get("error")) for k, v in list(bad.items())[:5]])
if pending or bad:
    print("peers left running for inspection", flush=True); os._exit(4)
for p in procs.values(): p.kill()
