package main

import (
	"context"
	"time"

	"k8s.io/client-go/rest"

	"github.com/taskaction/executor/internal/kwokrig"
)

// The rig is internal/kwokrig's; these names keep the bench's code short.
const benchNamespace = "default"

type proc = kwokrig.Proc

// rig is a kwokrig.Rig with the one controller identity the bench uses.
type rig struct {
	*kwokrig.Rig
	admin                  *rest.Config
	ctrlKC                 string // kubeconfig file of kwokrig.ControllerUser
	nodeUntaintedByHarness bool
}

func startRig(ctx context.Context, o options, dir string) (*rig, error) {
	kr, err := kwokrig.Start(ctx, kwokrig.Options{Root: o.Root, K8sBin: o.K8sBin, KwokBin: o.KwokBin, Nodes: o.Nodes,
		RunDelay: o.RunDelay, FinishDelay: o.FinishDelay, Logf: logf}, dir)
	if err != nil {
		return nil, err
	}
	return &rig{Rig: kr, admin: kr.Admin, ctrlKC: kr.Kubeconfig(), nodeUntaintedByHarness: kr.NodesUntaintedByHarness}, nil
}

func (r *rig) stop() { r.Stop() }

func startProc(_ context.Context, name, logPath, bin string, args ...string) (*proc, error) {
	return kwokrig.StartProc(name, logPath, bin, args...)
}

func freePort() (int, error) { return kwokrig.FreePort() }

func waitHTTP(ctx context.Context, url string, d time.Duration, p *proc) error {
	return kwokrig.WaitHTTP(ctx, url, d, p)
}

func waitTCP(ctx context.Context, addr string, d time.Duration, p *proc) error {
	return kwokrig.WaitTCP(ctx, addr, d, p)
}

func waitLogLine(ctx context.Context, p *proc, line string, d time.Duration) error {
	return kwokrig.WaitLogLine(ctx, p, line, 0, d)
}
