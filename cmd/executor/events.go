package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	eventsv2 "github.com/taskaction/executor/gen/executor/events/v2"
	"github.com/taskaction/executor/gen/flyteidl2/workflow"
	"github.com/taskaction/executor/pkg/config"
	"github.com/taskaction/executor/pkg/events"
	"github.com/taskaction/executor/pkg/eventsvc"
	"github.com/taskaction/executor/pkg/tracing"
)

// postgresDSNEnv lets the DSN (which may hold a password) stay off the command line.
const postgresDSNEnv = "EXECUTOR_EVENTS_POSTGRES_DSN"

// addEventsCommands adds the events service and its read side to root.
func addEventsCommands(root *cobra.Command, g *globalFlags) {
	root.AddCommand(newEventsServiceCommand(g), newEventsCommand(g))
}

func newEventsServiceCommand(g *globalFlags) *cobra.Command {
	var listen, dataDir, dsn string
	cmd := &cobra.Command{
		Use:   "events-service",
		Short: "Run the events service: stores the executor's action events (SQLite, or PostgreSQL with --postgres-dsn)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The configuration's otel section, as the executor reads it.
			cfg, err := g.loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			log := zap.New(zap.UseFlagOptions(&g.zap)).WithName("events-service")
			if dsn == "" {
				dsn = os.Getenv(postgresDSNEnv)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			traces, stopTracing, err := serviceTracing(ctx, cfg.Otel, tracing.ServiceEvents, log)
			if err != nil {
				return err
			}
			defer stopTracing()
			store, err := eventsvc.OpenStore(ctx, eventsvc.StoreConfig{DataDir: dataDir, PostgresDSN: dsn})
			if err != nil {
				return err
			}
			defer func() { _ = store.Close() }()
			if dsn != "" {
				log.Info("storing events in PostgreSQL")
			} else {
				log.Info("storing events in SQLite", "file", dataDir+"/"+eventsvc.SQLiteFile)
			}
			return eventsvc.NewServer(store, eventsvc.ServerOptions{Listen: listen, Log: log,
				TracerProvider: traces.Provider(tracing.ServiceEvents)}).Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", eventsvc.DefaultListen, "address to serve on (the executor's default eventsServiceURL is http://localhost:8090)")
	f.StringVar(&dataDir, "data-dir", "./data", "directory of the SQLite database (unused with --postgres-dsn)")
	f.StringVar(&dsn, "postgres-dsn", "", "PostgreSQL connection string; else $"+postgresDSNEnv+"; empty: SQLite")
	return cmd
}

type listFlags struct {
	org, project, domain, run, action string
	url, output                       string
	watch                             bool
}

func newEventsCommand(g *globalFlags) *cobra.Command {
	eventsCmd := &cobra.Command{
		Use:   "events",
		Short: "Read action events from the events service",
		Args:  cobra.NoArgs,
	}
	var lf listFlags
	list := &cobra.Command{
		Use:   "list",
		Short: "List a run's events (a table, or -o json: one object per line); --watch follows new ones",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if lf.output != "table" && lf.output != "json" {
				return fmt.Errorf("-o %q: want table or json", lf.output)
			}
			if cmd.Flags().Changed("events-url") {
				if err := config.ValidateServiceURL(lf.url); err != nil {
					return fmt.Errorf("--events-url: %w", err)
				}
			} else {
				cfg, err := g.loadConfig(cmd.Flags())
				if err != nil {
					return err
				}
				lf.url = cfg.EventsServiceURL
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return listEvents(ctx, cmd.OutOrStdout(), lf)
		},
	}
	f := list.Flags()
	f.StringVar(&lf.run, "run", "", "run name (required)")
	f.StringVar(&lf.org, "org", "", "org (empty: any)")
	f.StringVar(&lf.project, "project", "", "project (empty: any)")
	f.StringVar(&lf.domain, "domain", "", "domain (empty: any)")
	f.StringVar(&lf.action, "action", "", "only this action (not with --watch)")
	f.StringVar(&lf.url, "events-url", "", "events service base URL (default: the configuration's eventsServiceURL)")
	f.StringVarP(&lf.output, "output", "o", "table", "table or json")
	f.BoolVar(&lf.watch, "watch", false, "after the stored events, print new ones as they arrive, until interrupted")
	_ = list.MarkFlagRequired("run")
	eventsCmd.AddCommand(list)
	return eventsCmd
}

func listEvents(ctx context.Context, w io.Writer, lf listFlags) error {
	if lf.watch && lf.action != "" {
		return errors.New("--action cannot be used with --watch: watch follows a whole run")
	}
	client := events.NewQueryClient(lf.url, nil)
	p := newPrinter(w, lf.output, lf.watch)
	if lf.watch {
		stream, err := client.WatchActionEvents(ctx, connect.NewRequest(&eventsv2.WatchActionEventsRequest{
			Org: lf.org, Project: lf.project, Domain: lf.domain, Run: lf.run}))
		if err != nil {
			return fmt.Errorf("watch events of run %s at %s: %w", lf.run, lf.url, err)
		}
		defer func() { _ = stream.Close() }()
		for stream.Receive() {
			if err := p.print(stream.Msg().GetEvent()); err != nil {
				return err
			}
			if err := p.flush(); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return nil // interrupted: the normal way to stop watching
		}
		if err := stream.Err(); err != nil {
			return fmt.Errorf("watch events of run %s at %s: %w", lf.run, lf.url, err)
		}
		return nil
	}
	token := ""
	for {
		resp, err := client.ListActionEvents(ctx, connect.NewRequest(&eventsv2.ListActionEventsRequest{
			Org: lf.org, Project: lf.project, Domain: lf.domain, Run: lf.run, Action: lf.action, PageSize: 1000, PageToken: token}))
		if err != nil {
			return fmt.Errorf("list events of run %s at %s: %w", lf.run, lf.url, err)
		}
		for _, e := range resp.Msg.GetEvents() {
			if err := p.print(e); err != nil {
				return err
			}
		}
		if token = resp.Msg.GetNextPageToken(); token == "" {
			return p.flush()
		}
	}
}

// eventJSON is the -o json line: stable, camelCase names for scripts.
type eventJSON struct {
	Org          string `json:"org,omitempty"`
	Project      string `json:"project"`
	Domain       string `json:"domain"`
	Run          string `json:"run"`
	Action       string `json:"action"`
	ParentAction string `json:"parentAction,omitempty"`
	Attempt      int32  `json:"attempt"`
	Phase        string `json:"phase"`
	Version      int32  `json:"version"`
	UpdatedTime  string `json:"updatedTime"`
	ReportedTime string `json:"reportedTime,omitempty"`
	ErrorCode    string `json:"errorCode"`
	ErrorKind    string `json:"errorKind,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	Cluster      string `json:"cluster,omitempty"`
	PodName      string `json:"podName,omitempty"`
	CacheStatus  string `json:"cacheStatus,omitempty"`
	OutputURI    string `json:"outputUri,omitempty"`
	ReportURI    string `json:"reportUri,omitempty"`
}

type printer struct {
	w      io.Writer
	json   *json.Encoder
	tw     *tabwriter.Writer // nil when streaming
	header bool
}

// A watched table is printed line by line, so it gets fixed widths instead
// of a tabwriter, which aligns only what it has buffered.
const watchRow = "%-24s  %-24s  %-7v  %-21s  %-7v  %s\n"

func newPrinter(w io.Writer, output string, streaming bool) *printer {
	p := &printer{w: w}
	switch {
	case output == "json":
		p.json = json.NewEncoder(w)
	case !streaming:
		p.tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	}
	return p
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func (p *printer) print(pe *workflow.ActionEvent) error {
	e := events.FromProto(pe)
	var code, kind, msg string
	if e.Error != nil {
		code, kind, msg = e.Error.Code, e.Error.Kind, e.Error.Message
	}
	if p.json != nil {
		return p.json.Encode(eventJSON{
			Org: e.Org, Project: e.Project, Domain: e.Domain, Run: e.Run, Action: e.Action, ParentAction: e.ParentAction,
			Attempt: e.Attempt, Phase: string(e.Phase), Version: e.Version,
			UpdatedTime: fmtTime(e.UpdatedAt), ReportedTime: fmtTime(e.ReportedAt),
			ErrorCode: code, ErrorKind: kind, ErrorMessage: msg, Cluster: e.Cluster, PodName: e.PodName,
			CacheStatus: e.CacheStatus, OutputURI: e.OutputURI, ReportURI: e.ReportURI,
		})
	}
	row := []any{fmtTime(e.UpdatedAt), e.Action, e.Attempt, e.Phase, e.Version, code}
	header := []any{"TIME", "ACTION", "ATTEMPT", "PHASE", "VERSION", "ERROR CODE"}
	if p.tw == nil {
		if !p.header {
			p.header = true
			if _, err := fmt.Fprintf(p.w, watchRow, header...); err != nil {
				return err
			}
		}
		_, err := fmt.Fprintf(p.w, watchRow, row...)
		return err
	}
	if !p.header {
		p.header = true
		if _, err := fmt.Fprintf(p.tw, "%s\t%s\t%s\t%s\t%s\t%s\n", header...); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(p.tw, "%s\t%s\t%d\t%s\t%d\t%s\n", row...)
	return err
}

func (p *printer) flush() error {
	if p.tw != nil {
		return p.tw.Flush()
	}
	return nil
}
