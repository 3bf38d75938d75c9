// Command asynqbench runs needle's workloads W1-W3 (docs/design.md,
// "Workloads shared by bench/ and simulate/") on Asynq, so that
// bench/compare/run.sh can put the numbers next to needle's.
//
//	asynqbench worker --redis ADDR --id N [--concurrency 2] [--pinned]
//	asynqbench client --redis ADDR --durations FILE [--reps 3] [--json FILE]
//
// run.sh starts a redis-server, three worker processes (Concurrency 2 each,
// so 3 x 2 slots like needle's cluster) and then the client, which prints
// one JSON object with the medians over the repetitions. Every task writes
// its payload back as its result (asynq's ResultWriter, kept by Retention),
// and the client checks every result after each measurement.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

const (
	sharedQueue = "bench"    // served by every worker: W1 and W2
	pinnedQueue = "bench-w0" // served by worker 0 only: W3
	typeEcho    = "echo"
	typeSleep   = "sleep"
	retention   = time.Hour
	workersKey  = "needlebench:w3:workers" // hash worker id -> W3 tasks run
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("asynqbench: ")
	if len(os.Args) < 2 {
		log.Fatal("usage: asynqbench worker|client [flags]")
	}
	var err error
	switch os.Args[1] {
	case "worker":
		err = worker(os.Args[2:])
	case "client":
		err = client(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (want worker or client)", os.Args[1])
	}
	if err != nil {
		log.Fatal(err)
	}
}

// worker runs one asynq server until SIGTERM or SIGINT.
func worker(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	addr := fs.String("redis", "127.0.0.1:6379", "redis address")
	id := fs.Int("id", 0, "worker id (for the W3 per-worker counts)")
	conc := fs.Int("concurrency", 2, "tasks run at once (slots)")
	pinned := fs.Bool("pinned", false, "also serve the W3 queue "+pinnedQueue)
	check := fs.Duration("check", 2*time.Millisecond, "asynq TaskCheckInterval: idle poll period of each slot (asynq's default is 1s)")
	fs.Parse(args)

	queues := map[string]int{sharedQueue: 1}
	if *pinned {
		queues[pinnedQueue] = 1
	}
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	defer rdb.Close()
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: *addr}, asynq.Config{
		Concurrency:       *conc,
		Queues:            queues,
		TaskCheckInterval: *check,
		LogLevel:          asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(typeEcho, func(ctx context.Context, t *asynq.Task) error {
		_, err := t.ResultWriter().Write(t.Payload())
		return err
	})
	mux.HandleFunc(typeSleep, func(ctx context.Context, t *asynq.Task) error {
		var p struct {
			MS int `json:"ms"`
		}
		if err := json.Unmarshal(t.Payload(), &p); err != nil {
			return fmt.Errorf("sleep payload: %w", err)
		}
		select {
		case <-time.After(time.Duration(p.MS) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := rdb.HIncrBy(ctx, workersKey, strconv.Itoa(*id), 1).Err(); err != nil {
			return err
		}
		_, err := t.ResultWriter().Write(t.Payload())
		return err
	})
	if err := srv.Start(mux); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	srv.Shutdown()
	return nil
}

// result is what the client prints, in the shape run.sh reads.
type result struct {
	System           string               `json:"system"`
	W1TasksPerS      float64              `json:"w1_tasks_per_s"`
	W2P50MS          float64              `json:"w2_p50_ms"`
	W2P99MS          float64              `json:"w2_p99_ms"`
	W3MakespanOverLB float64              `json:"w3_makespan_over_lb"`
	W3MakespanS      float64              `json:"w3_makespan_s"`
	W3LBS            float64              `json:"w3_lb_s"`
	W3TasksByWorker  map[string]int64     `json:"w3_tasks_by_worker"`
	Reps             int                  `json:"reps"`
	PerRep           map[string][]float64 `json:"per_rep"`
	Setup            string               `json:"setup"`
	Problems         []string             `json:"problems,omitempty"`
}

type bench struct {
	rdb       *redis.Client
	cli       *asynq.Client
	insp      *asynq.Inspector
	durations []int
	problems  []string
}

func (b *bench) problemf(format string, a ...any) {
	if len(b.problems) < 20 {
		b.problems = append(b.problems, fmt.Sprintf(format, a...))
	}
}

func client(args []string) error {
	fs := flag.NewFlagSet("client", flag.ExitOnError)
	addr := fs.String("redis", "127.0.0.1:6379", "redis address")
	durFile := fs.String("durations", "", "W3 durations file (bench/testdata/w3-durations-ms.txt)")
	reps := fs.Int("reps", 3, "repetitions of each workload")
	w1Tasks := fs.Int("w1-tasks", 20000, "W1 tasks")
	w1Enqueuers := fs.Int("w1-enqueuers", 4, "W1 concurrent enqueuers")
	w2Tasks := fs.Int("w2-tasks", 500, "W2 tasks")
	slots := fs.Int("slots", 6, "total slots of the cluster, for LB")
	jsonOut := fs.String("json", "", "write the JSON result here too")
	setup := fs.String("setup", "", "free text describing the cluster, copied to the JSON")
	fs.Parse(args)

	durations, err := readDurations(*durFile)
	if err != nil {
		return err
	}
	opt := asynq.RedisClientOpt{Addr: *addr}
	b := &bench{
		rdb:       redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 32}),
		cli:       asynq.NewClient(opt),
		insp:      asynq.NewInspector(opt),
		durations: durations,
	}
	defer b.rdb.Close()
	defer b.cli.Close()
	defer b.insp.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := b.waitWorkers(ctx, 3, 30*time.Second); err != nil {
		return err
	}

	per := map[string][]float64{}
	add := func(k string, v float64) { per[k] = append(per[k], v) }
	var byWorker map[string]int64
	for rep := 1; rep <= *reps; rep++ {
		tps, err := b.w1(ctx, rep, *w1Tasks, *w1Enqueuers)
		if err != nil {
			return err
		}
		add("w1_tasks_per_s", tps)
		p50, p99, err := b.w2(ctx, rep, *w2Tasks)
		if err != nil {
			return err
		}
		add("w2_p50_ms", p50)
		add("w2_p99_ms", p99)
		ms, bw, err := b.w3(ctx, rep)
		if err != nil {
			return err
		}
		lb := lowerBound(durations, *slots)
		add("w3_makespan_s", ms)
		add("w3_makespan_over_lb", ms/lb)
		byWorker = bw
		log.Printf("rep %d: w1 %.0f tasks/s, w2 p50 %.2f ms p99 %.2f ms, w3 %.2f s = %.2f x LB, w3 tasks by worker %v",
			rep, tps, p50, p99, ms, ms/lb, bw)
	}
	r := result{
		System:           "asynq",
		W1TasksPerS:      median(per["w1_tasks_per_s"]),
		W2P50MS:          median(per["w2_p50_ms"]),
		W2P99MS:          median(per["w2_p99_ms"]),
		W3MakespanOverLB: median(per["w3_makespan_over_lb"]),
		W3MakespanS:      median(per["w3_makespan_s"]),
		W3LBS:            lowerBound(durations, *slots),
		W3TasksByWorker:  byWorker,
		Reps:             *reps,
		PerRep:           per,
		Setup:            *setup,
		Problems:         b.problems,
	}
	out, _ := json.MarshalIndent(r, "", "  ")
	fmt.Println(string(out))
	if *jsonOut != "" {
		if err := os.WriteFile(*jsonOut, append(out, '\n'), 0o644); err != nil {
			return err
		}
	}
	if len(b.problems) > 0 {
		return fmt.Errorf("%d failed checks, first: %s", len(b.problems), b.problems[0])
	}
	return nil
}

// waitWorkers waits until n asynq servers have registered in redis.
func (b *bench) waitWorkers(ctx context.Context, n int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		srvs, err := b.insp.Servers()
		if err == nil && len(srvs) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d asynq workers registered after %v (err %v)", len(srvs), n, limit, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func payload(w string, rep, i int) []byte {
	return []byte(fmt.Sprintf(`{"w":%q,"rep":%d,"i":%d}`, w, rep, i))
}

// w1: n echo tasks enqueued by a few concurrent enqueuers; tasks/s from
// the first enqueue until the queue's completed set holds all n.
func (b *bench) w1(ctx context.Context, rep, n, enqueuers int) (float64, error) {
	if err := b.clean(sharedQueue); err != nil {
		return 0, err
	}
	want := make(map[string][]byte, n)
	var mu sync.Mutex
	var next atomic.Int64
	errc := make(chan error, enqueuers)
	start := time.Now()
	for range enqueuers {
		go func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					errc <- nil
					return
				}
				p := payload("w1", rep, i)
				info, err := b.cli.EnqueueContext(ctx, asynq.NewTask(typeEcho, p),
					asynq.Queue(sharedQueue), asynq.Retention(retention), asynq.MaxRetry(0))
				if err != nil {
					errc <- fmt.Errorf("w1 enqueue: %w", err)
					return
				}
				mu.Lock()
				want[info.ID] = p
				mu.Unlock()
			}
		}()
	}
	for range enqueuers {
		if err := <-errc; err != nil {
			return 0, err
		}
	}
	if err := b.waitCompleted(ctx, sharedQueue, n, 5*time.Minute, time.Millisecond); err != nil {
		return 0, fmt.Errorf("w1: %w", err)
	}
	elapsed := time.Since(start)
	b.verify("w1", sharedQueue, want)
	return float64(n) / elapsed.Seconds(), nil
}

// w2: n single echo tasks one after another, enqueue then wait until
// asynq reports the task completed; p50 and p99 in ms.
func (b *bench) w2(ctx context.Context, rep, n int) (p50, p99 float64, err error) {
	if err := b.clean(sharedQueue); err != nil {
		return 0, 0, err
	}
	lat := make([]float64, 0, n)
	for i := range n {
		p := payload("w2", rep, i)
		start := time.Now()
		info, err := b.cli.EnqueueContext(ctx, asynq.NewTask(typeEcho, p),
			asynq.Queue(sharedQueue), asynq.Retention(retention), asynq.MaxRetry(0))
		if err != nil {
			return 0, 0, fmt.Errorf("w2 enqueue: %w", err)
		}
		ti, err := b.waitTask(ctx, sharedQueue, info.ID, 30*time.Second)
		if err != nil {
			return 0, 0, fmt.Errorf("w2: %w", err)
		}
		lat = append(lat, float64(time.Since(start).Microseconds())/1000)
		if string(ti.Result) != string(p) {
			b.problemf("w2 task %s: result %q, want %q", info.ID, ti.Result, p)
		}
	}
	return percentile(lat, 50), percentile(lat, 99), nil
}

// w3: the 300 sleep tasks, all on the queue that only worker 0 serves;
// makespan from the first enqueue until all are completed, in seconds.
func (b *bench) w3(ctx context.Context, rep int) (float64, map[string]int64, error) {
	if err := b.clean(pinnedQueue); err != nil {
		return 0, nil, err
	}
	if err := b.rdb.Del(ctx, workersKey).Err(); err != nil {
		return 0, nil, err
	}
	want := make(map[string][]byte, len(b.durations))
	start := time.Now()
	for i, d := range b.durations {
		p := []byte(fmt.Sprintf(`{"ms":%d,"i":%d,"rep":%d}`, d, i, rep))
		info, err := b.cli.EnqueueContext(ctx, asynq.NewTask(typeSleep, p),
			asynq.Queue(pinnedQueue), asynq.Retention(retention), asynq.MaxRetry(0),
			asynq.Timeout(time.Minute))
		if err != nil {
			return 0, nil, fmt.Errorf("w3 enqueue: %w", err)
		}
		want[info.ID] = p
	}
	if err := b.waitCompleted(ctx, pinnedQueue, len(want), 5*time.Minute, 5*time.Millisecond); err != nil {
		return 0, nil, fmt.Errorf("w3: %w", err)
	}
	makespan := time.Since(start).Seconds()
	b.verify("w3", pinnedQueue, want)
	m, err := b.rdb.HGetAll(ctx, workersKey).Result()
	if err != nil {
		return 0, nil, err
	}
	bw := map[string]int64{}
	for k, v := range m {
		bw["worker"+k], _ = strconv.ParseInt(v, 10, 64)
	}
	return makespan, bw, nil
}

// clean deletes the completed tasks a previous measurement left.
func (b *bench) clean(queue string) error {
	_, err := b.insp.DeleteAllCompletedTasks(queue)
	if err != nil && !strings.Contains(err.Error(), "does not exist") { // first use of the queue
		return fmt.Errorf("clean %s: %w", queue, err)
	}
	return nil
}

// waitCompleted polls the size of the queue's completed set (asynq keeps
// completed tasks there for their Retention) until it reaches n. ZCARD is
// O(1); the Inspector's GetQueueInfo samples memory usage, too heavy to
// poll every millisecond while the workers run.
func (b *bench) waitCompleted(ctx context.Context, queue string, n int, limit, every time.Duration) error {
	key := "asynq:{" + queue + "}:completed"
	deadline := time.Now().Add(limit)
	for {
		c, err := b.rdb.ZCard(ctx, key).Result()
		if err != nil {
			return err
		}
		if c >= int64(n) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d tasks completed after %v", c, n, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}

// waitTask polls one task's state (every 200 us) until it is completed.
func (b *bench) waitTask(ctx context.Context, queue, id string, limit time.Duration) (*asynq.TaskInfo, error) {
	deadline := time.Now().Add(limit)
	for {
		ti, err := b.insp.GetTaskInfo(queue, id)
		if err != nil {
			return nil, err
		}
		switch ti.State {
		case asynq.TaskStateCompleted:
			return ti, nil
		case asynq.TaskStateArchived:
			return nil, fmt.Errorf("task %s failed: %s", id, ti.LastErr)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("task %s still %v after %v", id, ti.State, limit)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Microsecond):
		}
	}
}

// verify lists the queue's completed tasks and checks each of want is
// there with its payload as result.
func (b *bench) verify(w, queue string, want map[string][]byte) {
	seen := 0
	for page := 1; ; page++ {
		tis, err := b.insp.ListCompletedTasks(queue, asynq.PageSize(1000), asynq.Page(page))
		if err != nil {
			b.problemf("%s: list completed: %v", w, err)
			return
		}
		for _, ti := range tis {
			p, ok := want[ti.ID]
			if !ok {
				continue
			}
			seen++
			if string(ti.Result) != string(p) {
				b.problemf("%s task %s: result %q, want %q", w, ti.ID, ti.Result, p)
			}
		}
		if len(tis) < 1000 {
			break
		}
	}
	if seen != len(want) {
		b.problemf("%s: %d of %d tasks found completed", w, seen, len(want))
	}
}

func readDurations(path string) ([]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, err
	}
	var ds []int
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		d, err := strconv.Atoi(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		return nil, fmt.Errorf("%s: no durations", path)
	}
	return ds, nil
}

// lowerBound is max(sum/slots, longest) in seconds.
func lowerBound(ds []int, slots int) float64 {
	sum, longest := 0, 0
	for _, d := range ds {
		sum += d
		longest = max(longest, d)
	}
	return math.Max(float64(sum)/float64(slots), float64(longest)) / 1000
}

// median is the middle value, the mean of the two middle ones for an even
// count (as needle's bench.Median).
func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(v))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// percentile is the nearest-rank percentile of v.
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
