package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseProm reads the samples of the Prometheus text exposition format.
func parseProm(b []byte) []sample {
	var out []sample
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s := sample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			s.name = line[:i]
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			parseLabels(line[i+1:j], s.labels)
			rest = strings.TrimSpace(line[j+1:])
		} else {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			s.name, rest = f[0], f[1]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		s.value = v
		out = append(out, s)
	}
	return out
}

func parseLabels(s string, into map[string]string) {
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return
		}
		key := strings.TrimSpace(strings.TrimLeft(s[:eq], ","))
		var val strings.Builder
		i := eq + 2
		for ; i < len(s); i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[i])
				}
				continue
			}
			if s[i] == '"' {
				break
			}
			val.WriteByte(s[i])
		}
		into[key] = val.String()
		s = s[min(i+1, len(s)):]
	}
}

// counters sums the samples of name by the key that keyOf builds.
func counters(ss []sample, name string, keyOf func(map[string]string) string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range ss {
		if s.name == name {
			out[keyOf(s.labels)] += s.value
		}
	}
	return out
}

func value(ss []sample, name string) float64 {
	var v float64
	for _, s := range ss {
		if s.name == name {
			v += s.value
		}
	}
	return v
}

// has says whether any sample is named name.
func has(ss []sample, name string) bool {
	for _, s := range ss {
		if s.name == name {
			return true
		}
	}
	return false
}

// bucket sums the histogram name's cumulative bucket le.
func bucket(ss []sample, name, le string) float64 {
	var v float64
	for _, s := range ss {
		if s.name == name+"_bucket" && s.labels["le"] == le {
			v += s.value
		}
	}
	return v
}

func delta(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// apiserverKey is "VERB resource[/subresource] code" of apiserver_request_total.
func apiserverKey(l map[string]string) string {
	res := l["resource"]
	if l["group"] != "" {
		res += "." + l["group"]
	}
	if l["subresource"] != "" {
		res += "/" + l["subresource"]
	}
	if res == "" {
		res = "none"
	}
	return l["verb"] + " " + res + " " + l["code"]
}

// clientKey is "verb resource code" of executor_api_requests_total.
func clientKey(l map[string]string) string { return l["verb"] + " " + l["resource"] + " " + l["code"] }

// scrapeAPIServer reads kube-apiserver's /metrics with admin credentials.
func scrapeAPIServer(ctx context.Context, cfg *rest.Config) ([]sample, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	return parseProm(b), nil
}

// profileAPIServer takes a CPU profile of kube-apiserver for o.ProfileAPIServer
// in the background and writes it into the results directory; the channel
// gives the outcome (at once when no profile was asked for).
func profileAPIServer(ctx context.Context, o options, cfg *rest.Config, mode string, start time.Time) <-chan error {
	out := make(chan error, 1)
	if o.ProfileAPIServer <= 0 {
		out <- nil
		return out
	}
	path := filepath.Join(o.Results, resultBase(start, strconv.Itoa(o.N), o.Tag)+"-"+mode+"-apiserver.pprof")
	go func() {
		out <- func() error {
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			secs := int(o.ProfileAPIServer.Seconds())
			ctx, cancel := context.WithTimeout(ctx, o.ProfileAPIServer+time.Minute)
			defer cancel()
			b, err := cs.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", strconv.Itoa(max(secs, 1))).Timeout(o.ProfileAPIServer + time.Minute).DoRaw(ctx)
			if err != nil {
				return fmt.Errorf("kube-apiserver /debug/pprof/profile: %w", err)
			}
			if err := os.MkdirAll(o.Results, 0o755); err != nil {
				return err
			}
			logf("kube-apiserver CPU profile of %ds: %s", secs, path)
			return os.WriteFile(path, b, 0o644)
		}()
	}()
	return out
}

func scrapeHTTP(ctx context.Context, url string) ([]sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseProm(b), nil
}

// procStat is what /proc says about a process.
type procStat struct {
	PeakRSSKiB int64   // VmHWM
	RSSKiB     int64   // VmRSS
	CPUSeconds float64 // utime + stime
}

func readProc(pid int) (procStat, error) {
	var st procStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmHWM:":
			st.PeakRSSKiB, _ = strconv.ParseInt(f[1], 10, 64)
		case "VmRSS:":
			st.RSSKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return st, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	// After the comm: state(3) ... utime(14) stime(15), so index 11 and 12 here.
	if len(f) < 13 {
		return st, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	stt, _ := strconv.ParseFloat(f[12], 64)
	st.CPUSeconds = (ut + stt) / clockTicks
	return st, nil
}

// clockTicks is USER_HZ, 100 on every Linux the bench runs on.
const clockTicks = 100

// machineCPU is the whole machine's CPU time from /proc/stat, in seconds
// summed over its CPUs: busy (user, nice, system, irq, softirq, steal) and
// all (busy, idle and iowait).
type machineCPU struct{ Busy, All float64 }

// since is the busy CPU seconds from earlier to m, and their share of the
// machine's CPU time in between (0 when no time passed).
func (m machineCPU) since(earlier machineCPU) (busy, share float64) {
	busy = m.Busy - earlier.Busy
	if all := m.All - earlier.All; all > 0 {
		share = busy / all
	}
	return busy, share
}

func readMachineCPU() (machineCPU, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineCPU{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var v [8]float64 // user nice system idle iowait irq softirq steal
	for i := range v {
		v[i], _ = strconv.ParseFloat(f[i+1], 64)
	}
	busy := v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	return machineCPU{Busy: busy / clockTicks, All: (busy + v[3] + v[4]) / clockTicks}, nil
}

// Machine describes where the numbers were measured.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	MemoryKiB int64  `json:"memoryKiB"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"goVersion"`
	Commit    string `json:"commit"`
	LoadAvg   string `json:"loadAvgAtStart"`
}

func machineInfo(root string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				m.MemoryKiB, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.TrimSpace(string(b))
	}
	m.Commit = gitHead(root)
	return m
}

// fileSHA is the first 12 hex digits of the file's SHA-256.
func fileSHA(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func gitHead(root string) string {
	head, err := os.ReadFile(root + "/.git/HEAD")
	if err != nil {
		return ""
	}
	ref := strings.TrimSpace(string(head))
	if r, ok := strings.CutPrefix(ref, "ref: "); ok {
		if b, err := os.ReadFile(root + "/.git/" + r); err == nil {
			return strings.TrimSpace(string(b))
		}
		if b, err := os.ReadFile(root + "/.git/packed-refs"); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) == 2 && f[1] == r {
					return f[0]
				}
			}
		}
		return r
	}
	return ref
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// eventCounts are the events service's own counters (its /metrics).
type eventCounts struct {
	calls, events, failed int64
}

// scrapeEvents reads the Record calls and events the events service at addr
// has answered (events_service_record_calls_total, events_service_events_total).
func scrapeEvents(ctx context.Context, addr string) (eventCounts, error) {
	ss, err := scrapeHTTP(ctx, "http://"+addr+"/metrics")
	if err != nil {
		return eventCounts{}, fmt.Errorf("events service metrics: %w", err)
	}
	var c eventCounts
	for code, n := range counters(ss, "events_service_record_calls_total", func(l map[string]string) string { return l["code"] }) {
		c.calls += int64(n)
		if code != "ok" {
			c.failed += int64(n)
		}
	}
	c.events = int64(value(ss, "events_service_events_total"))
	return c, nil
}
