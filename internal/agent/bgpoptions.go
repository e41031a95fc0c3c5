package agent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/vishvananda/netlink"

	"github.com/groundcloud/groundcloud/internal/bfd"
	"github.com/groundcloud/groundcloud/internal/bgp"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/kubecore"
)

// BGPOptions are the agent's BGP settings; the peers are in the
// cloud-config's [BGPPeer] sections.
type BGPOptions struct {
	// CloudConfig is the cloud-config file (--cloud-config): the agent
	// reads its [BGPPeer] sections. Empty: this host speaks no BGP.
	CloudConfig string
	// RouterID is --bgp-router-id (empty: the first IPv4 address of
	// --interface).
	RouterID string
	// WithdrawWait is how long the agent keeps forwarding after it
	// withdrew its routes on a stop.
	WithdrawWait time.Duration
	// HostLabels is --host-labels: this host's labels when it is not a
	// Node (empty: the labels of the Node named --host-name).
	HostLabels string
}

// ReasonBGPSessionDown and ReasonBGPSessionUp are the Events on this
// host's Node when a BGP session goes down or comes back;
// ReasonBGPPeerFailed when the speaker runs no session with a peer (a
// passive one while it cannot listen, one GoBGP refused).
const (
	ReasonBGPSessionDown = "BGPSessionDown"
	ReasonBGPSessionUp   = "BGPSessionUp"
	ReasonBGPPeerFailed  = "BGPPeerFailed"
)

// ReasonBFDSessionDown and ReasonBFDSessionUp are the Events on this
// host's Node when the BFD session with a peer leaves Up or comes Up;
// ReasonBFDFailed when the BFD sessions cannot run at all (the BGP
// sessions then run without them).
const (
	ReasonBFDSessionDown = "BFDSessionDown"
	ReasonBFDSessionUp   = "BFDSessionUp"
	ReasonBFDFailed      = "BFDFailed"
)

func (o *BGPOptions) validate() error {
	var errs []error
	if o.RouterID != "" {
		if a, err := netip.ParseAddr(o.RouterID); err != nil || !a.Is4() {
			errs = append(errs, fmt.Errorf("--bgp-router-id %q: want an IPv4 address", o.RouterID))
		}
	}
	if o.WithdrawWait < 0 {
		errs = append(errs, errors.New("--bgp-withdraw-wait must not be negative"))
	}
	if _, err := ParseHostLabels(o.HostLabels); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// hostLabels returns this host's fixed labels (--host-labels), or nil:
// then the agent reads its Node's labels (Config.HostLabels).
func (o *Options) hostLabels() (HostLabels, error) {
	if o.BGP.HostLabels != "" {
		set, err := ParseHostLabels(o.BGP.HostLabels)
		return FixedLabels(set), err
	}
	return nil, nil
}

// speaker builds the BGP speaker when the cloud-config cc has peers for
// this host (nil when it has none or cc is nil). A session that comes or
// goes is recorded as an Event and told to changed (the agent records it
// for membership, syncs, and reports what it advertises then).
func (o *Options) speaker(ctx context.Context, cc *cloudConfig, rec record.EventRecorder, changed func(bgp.Peer, bool)) (*bgp.Speaker, error) {
	if cc == nil {
		return nil, nil
	}
	if len(cc.Peers) == 0 {
		klog.FromContext(ctx).Info("No BGP peer selects this host; it advertises no route", "peers", cc.PeerSections)
		return nil, nil
	}
	id, err := o.routerID()
	if err != nil {
		return nil, err
	}
	bgp.RegisterMetrics()
	events := sessionEvents(rec, o.Host)
	return bgp.New(bgp.Config{
		RouterID: id, Peers: cc.Peers, WithdrawWait: o.BGP.WithdrawWait,
		SessionChanged: func(p bgp.Peer, up bool, state string) {
			events(p, up, state)
			changed(p, up)
		},
		PeerFailed: peerFailedEvents(rec, o.Host),
		BFDChanged: bfdEvents(rec, o.Host),
		BFDFailed:  bfdFailedEvents(rec, o.Host),
	}), nil
}

// bfdEvents records a BFD session's changes as Events on Node host:
// Normal when it comes Up; leaving Up for Down, a Warning when it failed
// (bgp.Failed: the BGP session is reset), Normal when the router stopped
// it administratively (the BGP session is kept). The host's own stop
// records nothing.
func bfdEvents(rec record.EventRecorder, host string) func(p bgp.Peer, c bfd.Change) {
	node := nodeRef(host)
	return func(p bgp.Peer, c bfd.Change) {
		switch {
		case c.To == bfd.Up:
			rec.Eventf(node, corev1.EventTypeNormal, ReasonBFDSessionUp, "BFD session with %s (%s) is up", p.Name, p.Address)
		case bgp.Failed(c):
			why := c.Diag.String()
			if c.Diag == bfd.DiagNeighborDown {
				why = "the router says it is down (" + c.RemoteDiag.String() + ")"
			}
			rec.Eventf(node, corev1.EventTypeWarning, ReasonBFDSessionDown,
				"BFD session with %s (%s) is down: %s; the BGP session with it is reset", p.Name, p.Address, why)
		case c.From == bfd.Up && c.To == bfd.Down:
			rec.Eventf(node, corev1.EventTypeNormal, ReasonBFDSessionDown,
				"BFD session with %s (%s) stopped by the router (administratively down); the BGP session is kept", p.Name, p.Address)
		}
	}
}

// bfdFailedEvents records a Warning Event on Node host when the BFD
// sessions cannot run.
func bfdFailedEvents(rec record.EventRecorder, host string) func(peers []bgp.Peer, err error) {
	node := nodeRef(host)
	return func(peers []bgp.Peer, err error) {
		names := make([]string, 0, len(peers))
		for _, p := range peers {
			names = append(names, p.Name)
		}
		rec.Eventf(node, corev1.EventTypeWarning, ReasonBFDFailed,
			"No BFD sessions with %s: %v. The BGP sessions run without BFD: a dead link is noticed after the hold time", strings.Join(names, ", "), err)
	}
}

// sessionEvents records a session's changes as Events on Node host: a
// Warning when it goes down, Normal when it is established.
func sessionEvents(rec record.EventRecorder, host string) func(p bgp.Peer, up bool, state string) {
	node := nodeRef(host)
	return func(p bgp.Peer, up bool, state string) {
		if up {
			rec.Eventf(node, corev1.EventTypeNormal, ReasonBGPSessionUp, "BGP session with %s (%s) established", p.Name, p.Address)
			return
		}
		rec.Eventf(node, corev1.EventTypeWarning, ReasonBGPSessionDown,
			"BGP session with %s (%s) is down (state %s): the router no longer sends this host the traffic of its addresses", p.Name, p.Address, state)
	}
}

// peerFailedEvents records a Warning Event on Node host for each peer the
// speaker runs no session with.
func peerFailedEvents(rec record.EventRecorder, host string) func(p bgp.Peer, err error) {
	node := nodeRef(host)
	return func(p bgp.Peer, err error) {
		rec.Eventf(node, corev1.EventTypeWarning, ReasonBGPPeerFailed,
			"No BGP session with %s (%s): %v. The sessions with the other peers are unaffected", p.Name, p.Address, err)
	}
}

// nodeRef refers to the Node named host, for Events.
func nodeRef(host string) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: host, UID: types.UID(host)}
}

// startLabels are the host's labels now, for choosing peers. While the
// apiserver cannot be reached (at a node's start, before kube-proxy has
// programmed the kubernetes Service, say) it retries, with backoff up to
// startLabelsMaxWait between tries, until ctx ends.
func (o *Options) startLabels(ctx context.Context, nodes kubecore.Nodes) (labels.Set, error) {
	if o.BGP.HostLabels != "" {
		return ParseHostLabels(o.BGP.HostLabels)
	}
	wait := time.Second / 2
	for {
		n, err := nodes.Get(ctx, o.Host, metav1.GetOptions{})
		switch {
		case err == nil:
			return labels.Set(n.Labels), nil
		case apierrors.IsNotFound(err):
			return labels.Set{}, nil
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			return nil, fmt.Errorf("labels of Node %s, for the BGP peers' host selectors: %w", o.Host, err)
		}
		klog.FromContext(ctx).Error(err, "Cannot read this host's Node labels to choose its BGP peers; retrying", "node", o.Host, "after", wait)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("labels of Node %s, for the BGP peers' host selectors: %w", o.Host, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, startLabelsMaxWait)
	}
}

// startLabelsMaxWait bounds the wait between two tries of startLabels.
const startLabelsMaxWait = 10 * time.Second

// peerOf reads a [BGPPeer] section and its password file.
func peerOf(p *config.BGPPeer) (bgp.Peer, error) {
	peer := bgp.Peer{
		Name: p.Name, Address: p.Address, ASN: p.ASN, LocalASN: p.LocalASN, Port: p.Port,
		HoldTime: p.HoldTime, KeepaliveTime: p.KeepaliveTime, SourceAddress: p.SourceAddress,
		Multihop: p.Multihop, Passive: p.Passive, Families: p.Families,
	}
	if p.GracefulRestart {
		peer.GracefulRestart = p.GracefulRestartTime
	}
	if p.BFD {
		peer.BFD = &bfd.Settings{
			DesiredMinTx: p.BFDTransmitInterval, RequiredMinRx: p.BFDReceiveInterval, DetectMult: uint8(p.BFDDetectMultiplier),
		}
	}
	if p.PasswordFile != "" {
		b, err := os.ReadFile(p.PasswordFile)
		if err != nil {
			return bgp.Peer{}, fmt.Errorf("[BGPPeer %q] password-file: %w", p.Name, err)
		}
		peer.Password = strings.TrimRight(string(b), "\r\n")
		if peer.Password == "" {
			return bgp.Peer{}, fmt.Errorf("[BGPPeer %q] password-file %s is empty", p.Name, p.PasswordFile)
		}
	}
	return peer, nil
}

// routerID is --bgp-router-id or the first IPv4 address of --interface.
func (o *Options) routerID() (netip.Addr, error) {
	if o.BGP.RouterID != "" {
		return netip.ParseAddr(o.BGP.RouterID)
	}
	link, err := netlink.LinkByName(o.Interface)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("BGP router ID: interface %s: %w", o.Interface, err)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("BGP router ID: addresses of %s: %w", o.Interface, err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap().Is4() {
			return ip.Unmap(), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("BGP router ID: %s has no IPv4 address; give --bgp-router-id", o.Interface)
}
