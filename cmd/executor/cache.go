package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/taskaction/executor/pkg/cachesvc"
	"github.com/taskaction/executor/pkg/tracing"
)

// cachePostgresDSNEnv is read when --postgres-dsn is not given: a DSN usually
// holds a password, which a flag would show in the process list.
const cachePostgresDSNEnv = "EXECUTOR_CACHE_POSTGRES_DSN"

// newCacheServiceCommand runs the task-output cache service.
func newCacheServiceCommand(g *globalFlags) *cobra.Command {
	var (
		listen, dataDir, dsn string
		maxAge, shutdown     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cache-service",
		Short: "Serve the task-output cache (entries and reservations) on SQLite, or PostgreSQL with --postgres-dsn",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if maxAge < 0 {
				return fmt.Errorf("--max-age %s is negative (0 keeps entries forever)", maxAge)
			}
			if dsn == "" {
				dsn = os.Getenv(cachePostgresDSNEnv)
			}
			// The configuration's otel section, as the executor reads it.
			cfg, err := g.loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&g.zap)))
			log := ctrl.Log.WithName("cache-service")
			ctx := cmd.Context()
			traces, stopTracing, err := serviceTracing(ctx, cfg.Otel, tracing.ServiceCache, log)
			if err != nil {
				return err
			}
			defer stopTracing()
			openCtx, cancel := context.WithTimeout(ctx, time.Minute)
			store, err := cachesvc.OpenStore(openCtx, cachesvc.StoreConfig{DataDir: dataDir, PostgresDSN: dsn})
			cancel()
			if err != nil {
				return fmt.Errorf("cache service: %w", err)
			}
			if dsn != "" {
				log.Info("cache store open", "backend", "postgres")
			} else {
				log.Info("cache store open", "backend", "sqlite", "file", filepath.Join(dataDir, cachesvc.SQLiteFile))
			}
			srv := cachesvc.NewServer(store, cachesvc.ServerOptions{Listen: listen, Log: log, MaxAge: maxAge, ShutdownTimeout: shutdown,
				TracerProvider: traces.Provider(tracing.ServiceCache)})
			return errors.Join(srv.Run(ctx), store.Close())
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", cachesvc.DefaultListen, "address to serve on")
	f.StringVar(&dataDir, "data-dir", "./data", "directory of the SQLite database ("+cachesvc.SQLiteFile+"); unused with --postgres-dsn")
	f.StringVar(&dsn, "postgres-dsn", "", "PostgreSQL DSN (URL or key=value); default $"+cachePostgresDSNEnv+"; empty: SQLite")
	f.DurationVar(&maxAge, "max-age", 0, "entries older than this count as missing; 0: no limit")
	f.DurationVar(&shutdown, "shutdown-timeout", 10*time.Second, "how long in-flight calls may finish after SIGTERM")
	return cmd
}
