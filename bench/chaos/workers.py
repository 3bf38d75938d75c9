#!/usr/bin/env python3
"""Worker chaos on real processes: P needled peers on loopback (the first
founds the mesh, the others join it, --worker-ttl 2s), W external worker
processes (clients/python, 2 tasks at a time and 2 prefetched, each named
cw<j> and polling peer j mod P), two clients submitting (about half of what
the workers run) keyed tasks of the worker handler through random peers,
and the workers stopped at random every 1-4 s, half with SIGKILL (another
instance under the same name: the peer hands the dead one's tasks back at
once) and half with SIGTERM (a graceful stop of 0.2 s: the worker releases
the tasks it has not started or finished, which spends no attempt), and
started again 0.3-2 s later. One task in
--poison (default 30) makes the process that runs it exit at once, as a
handler that crashes its worker does; such a process is started again
too. With "peers", a random peer is also killed with SIGKILL every 10-20 s
and started again on its data dir. With "lb", every worker talks to a load
balancer on port 7490 (in this script) that sends each request to a random
live peer: a worker's polls, heartbeats and reports reach different peers,
which forward each call on a lease to the peer that handed it out.

At the end every acknowledged task must be SUCCEEDED, but the poison ones,
which must be FAILED with the crash limit's error ("killed its workers"),
and no task may be left unfinished; the check goes on while the backlog
drains, until a minute passes without progress. Exits 4 when something is
wrong, with the peers left running.

    python3 bench/chaos/workers.py ./bin/needled 3 4 120 1 /tmp/wchaos [peers] [lb]
    #                              needled       P W seconds seed dir

Uses ports 7400+i (HTTP), 4400+i (libp2p) and 7490 (lb). Python 3 standard library and
clients/python only.
"""
import json, os, random, signal, subprocess, sys, threading, time, urllib.request, urllib.error

if len(sys.argv) < 7 or not set(sys.argv[7:]) <= {"peers", "lb"}:
    sys.exit(__doc__)
BIN = sys.argv[1]; P = int(sys.argv[2]); W = int(sys.argv[3]); DUR = float(sys.argv[4]); SEED = int(sys.argv[5]); ROOT = sys.argv[6]
KILL_PEERS = "peers" in sys.argv[7:]
LB = "lb" in sys.argv[7:]
LB_PORT = 7490
POISON = 30  # one task in POISON kills its worker
HANDLER = "chaos.work"
CLIENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python")
rnd = random.Random(SEED)
os.makedirs(ROOT, exist_ok=True)

WORKER = """
import os, sys, time
sys.path.insert(0, %r)
from needle_client import Worker
def work(task):
    if task.payload.get("poison"):
        os._exit(7)  # the handler takes its process down
    time.sleep(task.payload.get("ms", 0) / 1000)
    return task.payload
Worker({%r: work}, url=sys.argv[1], id=sys.argv[2], concurrency=2, prefetch=2, poll_wait=5, heartbeat=0.5,
       stop_grace=0.2).run()
""" % (CLIENTS, HANDLER)

peers, workers = {}, {}
counts = {"worker kills": 0, "worker stops": 0, "poison exits": 0, "peer kills": 0, "retried": 0}
lock = threading.Lock()
down = set()
stop = False      # the submitters and the chaos stop
sup_stop = False  # the supervisor stops (after the check)


def start_peer(i):
    args = [BIN, "--data", f"{ROOT}/d{i}", "--http", f"127.0.0.1:{7400+i}", "--listen", f"/ip4/127.0.0.1/tcp/{4400+i}",
            "--worker-ttl", "2s"]
    if i > 0:
        args += ["--join", "127.0.0.1:4400"]
    peers[i] = subprocess.Popen(args, stdout=open(f"{ROOT}/log{i}", "a"), stderr=subprocess.STDOUT)


def start_worker(j):
    counts["worker starts"] = counts.get("worker starts", 0) + 1
    url = f"http://127.0.0.1:{LB_PORT if LB else 7400 + j % P}"
    workers[j] = subprocess.Popen([sys.executable, "-c", WORKER, url, f"cw{j}"],
                                  stdout=open(f"{ROOT}/worker{j}", "a"), stderr=subprocess.STDOUT)


def call(i, method, path, body=None, timeout=5):
    req = urllib.request.Request(f"http://127.0.0.1:{7400+i}{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def healthy(i):
    try:
        call(i, "GET", "/healthz", timeout=1)
        return True
    except Exception:
        return False


def balance():
    """A load balancer in front of the live peers: each request goes to a
    random one (a connection per request, so nothing sticks)."""
    import http.server

    class Proxy(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def relay(self):
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            with lock:
                live = [i for i in range(P) if i not in down] or list(range(P))
            i = random.choice(live)
            req = urllib.request.Request(f"http://127.0.0.1:{7400+i}{self.path}", method=self.command,
                                         data=body if self.command == "POST" else None,
                                         headers={k: v for k, v in self.headers.items()
                                                  if k.lower() in ("content-type", "authorization")})
            try:
                with urllib.request.urlopen(req, timeout=330) as r:
                    status, data, ctype = r.status, r.read(), r.headers.get("content-type", "")
            except urllib.error.HTTPError as e:
                status, data, ctype = e.code, e.read(), e.headers.get("content-type", "")
            except Exception as e:
                status, data, ctype = 502, json.dumps({"error": {"code": "bad_gateway", "message": str(e)}}).encode(), "application/json"
            with lock:
                counts["lb requests"] = counts.get("lb requests", 0) + 1
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = relay

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", LB_PORT), Proxy)
    srv.daemon_threads = True
    srv.handle_error = lambda *a: None  # a killed worker's connection, cut
    threading.Thread(target=srv.serve_forever, daemon=True).start()


for i in range(P):
    start_peer(i)
    while not healthy(i):
        time.sleep(0.1)
if LB:
    balance()
time.sleep(2)
for j in range(W):
    start_worker(j)

acked = {}  # key -> (task id, poison)
errors = []


def submitter(c):
    n = 0
    r = random.Random(SEED * 100 + c)
    while not stop:
        n += 1
        key = f"c{c}-{n}"
        poison = r.randrange(POISON) == 0
        body = {"handler": HANDLER, "key": key, "payload": {"ms": r.randint(0, 400), "poison": poison, "key": key}}
        t0 = time.time()
        tid = None
        while tid is None and time.time() - t0 < 60 and not stop:
            with lock:
                live = [i for i in range(P) if i not in down]
            try:
                tid = call(r.choice(live), "POST", "/v1/tasks", body)["id"]
            except urllib.error.HTTPError as e:
                msg = e.read()[:200]
                if e.code < 500 and e.code not in (409, 429):
                    errors.append((key, e.code, msg))
                    break
                with lock:
                    counts["retried"] += 1
                time.sleep(0.2)
            except Exception:
                time.sleep(0.2)
        if tid is None:
            continue  # never acknowledged: nothing is owed
        if key in acked and acked[key][0] != tid:
            errors.append((key, "id changed", acked[key][0], tid))
        acked[key] = (tid, poison)
        time.sleep(r.uniform(0.05, 0.15))  # about half of what the workers run


def supervise():
    """Starts again every worker that exited (a poison task, or a kill)."""
    while not sup_stop:
        time.sleep(0.2)
        for j, p in list(workers.items()):
            if p.poll() is not None:
                with lock:
                    if p.returncode == 7:
                        counts["poison exits"] += 1
                time.sleep(rnd.uniform(0.3, 2))
                start_worker(j)


def chaos():
    end = time.time() + DUR
    next_peer = time.time() + rnd.uniform(10, 20)
    while time.time() < end:
        time.sleep(rnd.uniform(1, 4))
        j = rnd.randrange(W)
        if rnd.random() < 0.5:
            workers[j].send_signal(signal.SIGKILL)
            with lock:
                counts["worker kills"] += 1
        else:  # a graceful stop: it releases what it holds and has not finished
            workers[j].send_signal(signal.SIGTERM)
            with lock:
                counts["worker stops"] += 1
        if KILL_PEERS and time.time() >= next_peer:
            next_peer = time.time() + rnd.uniform(10, 20)
            i = rnd.randrange(P)
            with lock:
                down.add(i)
            peers[i].send_signal(signal.SIGKILL)
            peers[i].wait()
            with lock:
                counts["peer kills"] += 1
            print(f"{time.strftime('%X')} killed peer {i}", flush=True)
            time.sleep(rnd.uniform(0.5, 3))
            start_peer(i)
            t0 = time.time()
            while not healthy(i) and time.time() - t0 < 120:
                time.sleep(0.25)
            print(f"{time.strftime('%X')} restarted peer {i} healthy={healthy(i)} after {time.time()-t0:.1f}s", flush=True)
            with lock:
                down.discard(i)


ths = [threading.Thread(target=submitter, args=(c,)) for c in range(2)]
sup = threading.Thread(target=supervise)
for t in ths + [sup]:
    t.start()
chaos()
stop = True
for t in ths:
    t.join()
print("acked", len(acked), "poison", sum(1 for _, p in acked.values() if p), "errors", len(errors), errors[:5], flush=True)
print(counts, flush=True)

pending = dict(acked)
final = {}
progress = time.time()
while pending and time.time() - progress < 60:
    for key, (tid, poison) in list(pending.items()):
        try:
            r = call(rnd.randrange(P), "GET", f"/v1/tasks/{tid}")
        except Exception:
            continue
        if r.get("state") in ("SUCCEEDED", "FAILED", "CANCELED"):
            final[key] = (r, poison)
            del pending[key]
            progress = time.time()
    print(f"check: {len(final)} terminal, {len(pending)} pending", flush=True)
    if pending:
        time.sleep(2)
sup_stop = True
sup.join()

bad = []
for key, (r, poison) in final.items():
    if poison and not (r["state"] == "FAILED" and "killed its workers" in (r.get("error") or "")):
        bad.append((key, r["id"], r["state"], r.get("error"), r.get("worker_deaths")))
    if not poison and r["state"] != "SUCCEEDED":
        bad.append((key, r["id"], r["state"], r.get("error"), r.get("worker_deaths")))
import re
alone = shared = 0
for r, poison in final.values():
    m = re.search(r"(\d+) workers died running it alone \(and (?:at least )?(\d+) beside", r.get("error") or "")
    if poison and m:
        alone += int(m.group(1)); shared += int(m.group(2))
print(f"poison tasks' deaths: {alone} alone, {shared} beside others", flush=True)
print("after the check:", counts, flush=True)
for i in range(P):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{7400+i}/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("needle_worker_deaths_total") or line.startswith("needle_worker_crash_limit_total"):
                    print(f"peer {i}: {line}", flush=True)
    except Exception as e:
        print("metrics", i, e)
print("unfinished", len(pending), list(pending.items())[:5], flush=True)
print("wrong outcome", len(bad), bad[:10], flush=True)
if pending or bad or errors:
    print("FAIL: peers left running", flush=True)
    for p in workers.values():
        p.kill()
    os._exit(4)
if os.environ.get("KEEP"):
    print("OK (KEEP: peers and workers left running)", flush=True)
    os._exit(0)
for p in list(workers.values()) + list(peers.values()):
    p.kill()
print("OK", flush=True)
