package v1_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flytev1 "github.com/taskaction/executor/api/v1"
	"github.com/taskaction/executor/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

func TestSmokeCreate(t *testing.T) {
	ta := &flytev1.TaskAction{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Spec:       flytev1.TaskActionSpec{RunName: "r", Project: "p", Domain: "d", ActionName: "a"},
	}
	if err := env.Client.Create(context.Background(), ta); err != nil {
		t.Fatal(err)
	}
}
