package agent

import (
	"context"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/internal/bgp"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/kubecore"
)

// ReasonCloudConfigProblems is the Warning Event on this host's Node when
// the cloud-config the agent started with has problems.
const ReasonCloudConfigProblems = "CloudConfigProblems"

// cloudConfig is what the agent uses of the cloud-config: its [Routes]
// section and the [BGPPeer] sections that select this host. The agent
// reads the file once, at start. A problem does not stop it: it goes on
// with the parts it can use, because the file is the controller manager's
// too, and an agent that exited on a typo in a [Machine] section (or in a
// router's password file) would take down a host that restarts.
type cloudConfig struct {
	// Routes is the [Routes] section as far as it could be read: a key
	// with a problem is off.
	Routes config.Routes
	// Peers are the routers this host opens a session with: the [BGPPeer]
	// sections without a problem that select it, whose password-file
	// could be read.
	Peers []bgp.Peer
	// PeerSections counts the file's [BGPPeer] sections.
	PeerSections int
	// LeftOut names the [BGPPeer] sections left out for a problem: in the
	// section, or with the password-file of one that selects this host.
	LeftOut []string
	// Problems is everything wrong with the file, in every section (those
	// the agent does not read too), each with its line.
	Problems []error
}

// loadCloudConfig reads the cloud-config at path. hostLabels gives this
// host's labels, for the peers' host selectors; it is called only when the
// file has a usable [BGPPeer] section. Only an unreadable file, or labels
// that cannot be had, are errors.
func loadCloudConfig(path string, hostLabels func() (labels.Set, error)) (*cloudConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--cloud-config: %w", err)
	}
	part := config.ParsePartial(path, data)
	cc := &cloudConfig{Routes: part.Config.Routes, PeerSections: len(part.Config.BGPPeers)}
	for _, p := range part.Problems {
		cc.Problems = append(cc.Problems, p)
	}
	for _, s := range part.LeftOut {
		if s.Kind == config.KindBGPPeer {
			cc.LeftOut = append(cc.LeftOut, s.Name)
			cc.PeerSections++
		}
	}
	if len(part.Config.BGPPeers) == 0 {
		return cc, nil
	}
	host, err := hostLabels()
	if err != nil {
		return nil, err
	}
	for _, p := range part.Config.BGPPeers {
		if !p.Hosts.Matches(host) {
			continue
		}
		peer, err := peerOf(p)
		if err != nil {
			cc.LeftOut = append(cc.LeftOut, p.Name)
			cc.Problems = append(cc.Problems, fmt.Errorf("%s: %w", path, err))
			continue
		}
		cc.Peers = append(cc.Peers, peer)
	}
	return cc, nil
}

// cloudConfig reads --cloud-config (nil without one) and reports its
// problems.
func (o *Options) cloudConfig(ctx context.Context, nodes kubecore.Nodes, rec record.EventRecorder) (*cloudConfig, error) {
	if o.BGP.CloudConfig == "" {
		return nil, nil
	}
	cc, err := loadCloudConfig(o.BGP.CloudConfig, func() (labels.Set, error) { return o.startLabels(ctx, nodes) })
	if err != nil {
		return nil, err
	}
	reportCloudConfig(klog.FromContext(ctx), rec, o.Host, o.BGP.CloudConfig, cc)
	return cc, nil
}

// reportCloudConfig says what is wrong with the cloud-config: every
// problem in the log, their number and the peers left out in metrics, and
// a Warning Event on the host's Node.
func reportCloudConfig(logger klog.Logger, rec record.EventRecorder, host, path string, cc *cloudConfig) {
	cloudConfigProblems.Set(float64(len(cc.Problems)))
	bgpPeersLeftOut.Set(float64(len(cc.LeftOut)))
	if len(cc.Problems) == 0 {
		return
	}
	for _, p := range cc.Problems {
		logger.Error(nil, "Cloud-config problem; the agent goes on with the parts it can use", "problem", p.Error())
	}
	without := ""
	if len(cc.LeftOut) > 0 {
		logger.Error(nil, "BGP peers left out for their problems; this host opens no session with them", "peers", cc.LeftOut)
		without = ", without the BGP peers " + strings.Join(cc.LeftOut, ", ")
	}
	rec.Eventf(nodeRef(host), corev1.EventTypeWarning, ReasonCloudConfigProblems,
		"The cloud-config %s has %d problem(s), all in the agent's log; the agent goes on with the parts it can use%s. The first: %s",
		path, len(cc.Problems), without, cc.Problems[0])
}
