package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flytev1 "github.com/taskaction/executor/api/v1"
)

// DemoNamespace is where the demo applies the samples.
const DemoNamespace = "default"

// sample is one TaskAction of the demo and the end it must reach.
type sample struct {
	ta         *flytev1.TaskAction
	wantFailed bool
	attempts   int32 // expected attempts at the end; 0: any
	cacheHit   bool
	after      string // applied once this one is terminal (a second run of a cached task)
	applied    bool
}

// LoadSamples reads the TaskActions of dir (config/samples). A file whose
// name says "fail" must end Failed after all its retries; a TaskAction with
// a cacheKey is run a second time, as "<name>-again", which must be a cache hit.
func LoadSamples(dir string) ([]*sample, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []*sample
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(b)), 4096)
		for {
			ta := &flytev1.TaskAction{}
			if err := dec.Decode(ta); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if ta.Kind != "TaskAction" || ta.Name == "" {
				continue
			}
			ta.Namespace = DemoNamespace
			s := &sample{ta: ta, wantFailed: strings.Contains(filepath.Base(f), "fail")}
			if s.wantFailed && ta.Spec.Template != nil {
				s.attempts = ta.Spec.Template.Retries + 1
			}
			out = append(out, s)
			if ta.Spec.CacheKey != "" && !s.wantFailed {
				again := ta.DeepCopy()
				again.Name = ta.Name + "-again"
				// Another action of the run with the same task and inputs.
				again.Spec.ActionName = truncateName(ta.Spec.ActionName+"-again", 30)
				out = append(out, &sample{ta: again, cacheHit: true, after: ta.Name})
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no TaskAction samples in %s", dir)
	}
	return out, nil
}

func truncateName(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// runDemo applies the samples and shows their progress until each is
// terminal (nil if each as expected), the timeout, or ctx's end. failed
// reports a component that stopped: the demo ends with it.
func runDemo(parent context.Context, c client.Client, o Options, node *Node, samples []*sample, failed <-chan error) error {
	ctx, cancel := context.WithTimeout(parent, o.DemoTimeout)
	defer cancel()
	byName := map[string]*sample{}
	for _, s := range samples {
		byName[s.ta.Name] = s
	}
	tty := isTerminal(o.Out)
	last, drawn := "", 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, s := range samples {
			if s.applied || (s.after != "" && !byName[s.after].terminal()) {
				continue
			}
			if err := c.Create(ctx, s.ta.DeepCopy()); err != nil {
				return fmt.Errorf("demo: apply TaskAction %s: %w", s.ta.Name, err)
			}
			s.applied = true
		}
		var live flytev1.TaskActionList
		if err := c.List(ctx, &live, client.InNamespace(DemoNamespace)); err != nil && ctx.Err() == nil {
			return fmt.Errorf("demo: list TaskActions: %w", err)
		}
		for i := range live.Items {
			if s := byName[live.Items[i].Name]; s != nil {
				s.ta = &live.Items[i]
			}
		}
		table, done, bad := demoTable(samples, time.Now())
		// A terminal redraws every second (ages move); a log gets a table per change.
		key := table
		if !tty {
			key = stateKey(samples)
		}
		if key != last {
			if tty && drawn > 0 {
				// Over the previous table only: the summary above stays on screen.
				_, _ = fmt.Fprintf(o.Out, "\033[%dA\033[J", drawn)
			}
			_, _ = fmt.Fprint(o.Out, table)
			last, drawn = key, strings.Count(table, "\n")
		}
		switch {
		case done && len(bad) > 0:
			return fmt.Errorf("demo: %s (pod logs under %s)", strings.Join(bad, "; "), filepath.Join(node.DataDir, "pods"))
		case done:
			_, _ = fmt.Fprintln(o.Out, "demo: every sample reached its expected end")
			return nil
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return errors.New("demo: interrupted")
			}
			var open []string
			for _, s := range samples {
				if !s.terminal() {
					open = append(open, s.ta.Name+" ("+s.phase()+")")
				}
			}
			return fmt.Errorf("demo: timed out after %s waiting for %s", o.DemoTimeout, strings.Join(open, ", "))
		case err := <-failed:
			return fmt.Errorf("demo: stopped unexpectedly: %w", err)
		case <-tick.C:
		}
	}
}

func (s *sample) terminal() bool {
	return s.applied && s.ta.CreationTimestamp.Unix() > 0 &&
		(meta.IsStatusConditionTrue(s.ta.Status.Conditions, flytev1.ConditionSucceeded) ||
			meta.IsStatusConditionTrue(s.ta.Status.Conditions, flytev1.ConditionFailed))
}

// phase is the TaskAction's state in a word: its terminal condition, else the
// reason of Progressing.
func (s *sample) phase() string {
	if !s.applied {
		return "waiting for " + s.after
	}
	st := s.ta.Status
	for _, t := range []string{flytev1.ConditionSucceeded, flytev1.ConditionFailed} {
		if c := meta.FindStatusCondition(st.Conditions, t); c != nil && c.Status == "True" {
			return t + "/" + c.Reason
		}
	}
	if c := meta.FindStatusCondition(st.Conditions, flytev1.ConditionProgressing); c != nil {
		return c.Reason
	}
	return "Pending"
}

func (s *sample) want() string {
	switch {
	case s.wantFailed && s.attempts > 0:
		return fmt.Sprintf("Failed after %d attempts", s.attempts)
	case s.wantFailed:
		return "Failed"
	case s.cacheHit:
		return "Succeeded, cache HIT"
	}
	return "Succeeded"
}

// check says what is wrong with a terminal sample's end, or "".
func (s *sample) check() string {
	st := s.ta.Status
	failed := meta.IsStatusConditionTrue(st.Conditions, flytev1.ConditionFailed)
	var msg string
	switch {
	case failed != s.wantFailed:
		msg = fmt.Sprintf("%s ended %s, expected %s", s.ta.Name, s.phase(), s.want())
	case s.attempts > 0 && st.Attempts != s.attempts:
		msg = fmt.Sprintf("%s ended %s after %d attempts, expected %d", s.ta.Name, s.phase(), st.Attempts, s.attempts)
	case s.cacheHit && st.CacheStatus != flytev1.CacheHit:
		return fmt.Sprintf("%s ended with cache status %q, expected HIT (is the cache service running at the cacheServiceURL?)", s.ta.Name, st.CacheStatus)
	default:
		return ""
	}
	if c := meta.FindStatusCondition(st.Conditions, flytev1.ConditionFailed); failed && c != nil && c.Message != "" {
		msg += ": " + c.Message
	}
	return msg
}

// demoTable renders the samples; done when all are terminal, bad lists those
// that ended otherwise than expected.
func demoTable(samples []*sample, now time.Time) (table string, done bool, bad []string) {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "NAME\tPHASE\tATTEMPT\tCACHE\tAGE\tEXPECTED")
	done = true
	for _, s := range samples {
		age := "-"
		if s.applied && !s.ta.CreationTimestamp.IsZero() {
			age = now.Sub(s.ta.CreationTimestamp.Time).Truncate(time.Second).String()
		}
		cache := string(s.ta.Status.CacheStatus)
		if cache == "" {
			cache = "-"
		}
		mark := ""
		if s.terminal() {
			if msg := s.check(); msg != "" {
				bad = append(bad, msg)
				mark = "  ✗"
			} else {
				mark = "  ✓"
			}
		} else {
			done = false
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s%s\n", s.ta.Name, s.phase(), s.ta.Status.Attempts, cache, age, s.want(), mark)
	}
	_ = w.Flush()
	return b.String(), done, bad
}

func stateKey(samples []*sample) string {
	var b strings.Builder
	for _, s := range samples {
		fmt.Fprintf(&b, "%s %s %d %s\n", s.ta.Name, s.phase(), s.ta.Status.Attempts, s.ta.Status.CacheStatus)
	}
	return b.String()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
