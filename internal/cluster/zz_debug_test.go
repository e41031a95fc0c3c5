package cluster

import (
	"os"
	"testing"
	"time"
)

func TestDebugCluster(t *testing.T) {
	if os.Getenv("DEBUGCLUSTER") == "" {
		t.Skip()
	}
	os.RemoveAll("/tmp/gcdebug")
	c := StartT(t, Options{Dir: "/tmp/gcdebug", Prefix: "gcdebug"})
	os.WriteFile("/tmp/gcdebug/HOLD", nil, 0o644)
	t.Logf("cluster up; remove /tmp/gcdebug/HOLD to stop")
	for {
		if _, err := os.Stat("/tmp/gcdebug/HOLD"); err != nil {
			break
		}
		time.Sleep(time.Second)
	}
	_ = c
}
