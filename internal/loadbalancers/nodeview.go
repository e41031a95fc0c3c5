package loadbalancers

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/inventory"
)

// nodeDebounce gathers the Node events of one change (the cloud-node
// controller initialises a node in two writes, say) into one recompute.
var nodeDebounce = 200 * time.Millisecond

// configCheck is how often the view checks whether a reloaded cloud-config
// changed the inventory addresses it falls back on.
const configCheck = time.Second

// nodeView keeps the backends every LoadBalancer sends to, computed with
// Backends from the controller manager's Node cache. The service
// controller asks for a node sync only when a node's providerID or
// exclusion label changes, and not when a node's uninitialized taint goes or
// its addresses arrive, so a node that joins after the Services exist
// would never be added: the view follows every Node change itself.
type nodeView struct {
	informer cache.SharedIndexInformer
	lister   corelisters.NodeLister
	synced   cache.InformerSynced
	config   func() *config.Config
	poked    chan struct{}

	mu       sync.Mutex
	backends []v1alpha1.Backend
	from     *config.Config // the cloud-config backends was computed with
}

func newNodeView(inf cache.SharedIndexInformer, lister corelisters.NodeLister, cfg func() *config.Config) *nodeView {
	return &nodeView{informer: inf, lister: lister, synced: inf.HasSynced, config: cfg, poked: make(chan struct{}, 1)}
}

// current returns the backends; the caller must not modify them.
func (v *nodeView) current() []v1alpha1.Backend {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.backends
}

// watch pokes the view on every Node change that could change its backend.
func (v *nodeView) watch(logger klog.Logger) {
	_, err := v.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { v.poke() },
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*v1.Node)
			c, ok2 := cur.(*v1.Node)
			if !ok1 || !ok2 {
				v.poke()
				return
			}
			fallback := inventoryAddresses(v.config())
			bo, oko := Backend(o, fallback)
			bc, okc := Backend(c, fallback)
			if oko != okc || !equality.Semantic.DeepEqual(bo, bc) {
				v.poke()
			}
		},
		DeleteFunc: func(any) { v.poke() },
	})
	if err != nil {
		logger.Error(err, "Cannot watch Nodes; backends follow the service controller only")
	}
}

func (v *nodeView) poke() {
	select {
	case v.poked <- struct{}{}:
	default:
	}
}

// run recomputes the backends after Node changes (debounced) and when the
// cloud-config changes, and calls changed when they differ, until ctx ends.
func (v *nodeView) run(ctx context.Context, changed func()) {
	tick := time.NewTicker(configCheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-v.poked:
		case <-tick.C:
			v.mu.Lock()
			same := v.from == v.config()
			v.mu.Unlock()
			if same {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(nodeDebounce):
		}
		select {
		case <-v.poked:
		default:
		}
		if v.recompute(ctx) {
			changed()
		}
	}
}

// recompute sets the backends from the Node cache and reports whether they
// changed.
func (v *nodeView) recompute(ctx context.Context) bool {
	logger := klog.FromContext(ctx)
	cfg := v.config()
	nodes, err := v.lister.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Cannot list Nodes")
		return false
	}
	backends := Backends(nodes, inventoryAddresses(cfg))
	if n := len(backends); n > MaxBackends {
		logger.Error(nil, "More nodes may carry traffic than a LoadBalancer holds; the first by name are used",
			"eligible", n, "limit", MaxBackends, "firstLeftOut", backends[MaxBackends].NodeName)
		backends = backends[:MaxBackends]
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.from = cfg
	if equality.Semantic.DeepEqual(v.backends, backends) {
		return false
	}
	logger.V(2).Info("Backends changed", "nodes", len(backends))
	v.backends = backends
	return true
}

// inventoryAddresses gives a node's addresses from the cloud-config
// inventory, as the cloud-node controller will write them.
func inventoryAddresses(cfg *config.Config) AddressFallback {
	return func(n *v1.Node) []v1.NodeAddress {
		if match := inventory.Lookup(cfg, n); match.Machine != nil {
			return match.Machine.Addresses
		}
		return nil
	}
}
