package addresspools

import (
	"math"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundcloud/groundcloud/api/v1alpha1"
	"github.com/groundcloud/groundcloud/internal/config"
	"github.com/groundcloud/groundcloud/internal/ipam"
)

// Snapshot is the state the objects are computed from.
type Snapshot struct {
	Pools []*config.Pool
	Usage []ipam.PoolUsage
	// Orphans counts orphaned addresses by the pool they were given from.
	Orphans map[string]int
}

// Desired returns the AddressPool of each pool of s, in the pools' order.
func Desired(s Snapshot) []*v1alpha1.AddressPool {
	out := make([]*v1alpha1.AddressPool, 0, len(s.Pools))
	for _, p := range s.Pools {
		ap := &v1alpha1.AddressPool{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "AddressPool"},
			ObjectMeta: metav1.ObjectMeta{Name: p.Name},
			Spec:       v1alpha1.AddressPoolSpec{AutoAssign: p.AutoAssign, Namespaces: slices.Clone(p.Namespaces)},
			Status:     v1alpha1.AddressPoolStatus{Orphaned: int64(s.Orphans[p.Name])},
		}
		for _, r := range p.Ranges {
			ap.Spec.Ranges = append(ap.Spec.Ranges, r.String())
		}
		// IPv4 first, whatever order the ranges come in.
		for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			i := slices.IndexFunc(s.Usage, func(u ipam.PoolUsage) bool { return u.Pool == p.Name && u.Family == fam })
			if i >= 0 {
				ap.Status.Families = append(ap.Status.Families, familyUsage(s.Usage[i]))
			}
		}
		ap.Status.Summary = summary(ap, s.Usage)
		out = append(out, ap)
	}
	return out
}

func familyUsage(u ipam.PoolUsage) v1alpha1.FamilyUsage {
	return v1alpha1.FamilyUsage{
		Family: string(u.Family), Size: saturate(u.Size), Used: saturate(u.Used), InUse: saturate(u.InUse), Free: saturate(freeOf(u)),
	}
}

// freeOf is how many addresses of u are neither held nor in use.
func freeOf(u ipam.PoolUsage) uint64 {
	return u.Size - min(u.Used+u.InUse, u.Size)
}

func saturate(n uint64) int64 {
	if n > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(n)
}

// summary writes the usage as text, exact even where the typed fields
// saturate.
func summary(ap *v1alpha1.AddressPool, usage []ipam.PoolUsage) v1alpha1.UsageSummary {
	var fams, size, used, free []string
	for _, f := range ap.Status.Families {
		i := slices.IndexFunc(usage, func(u ipam.PoolUsage) bool { return u.Pool == ap.Name && string(u.Family) == f.Family })
		u := usage[i]
		fams = append(fams, f.Family)
		size = append(size, count(u.Size))
		used = append(used, count(u.Used))
		if u.Size == math.MaxUint64 {
			free = append(free, count(u.Size)) // too many to subtract from
		} else {
			free = append(free, count(freeOf(u)))
		}
	}
	return v1alpha1.UsageSummary{
		Families: strings.Join(fams, ","), Size: strings.Join(size, ","), Used: strings.Join(used, ","), Free: strings.Join(free, ","),
		Ranges: strings.Join(ap.Spec.Ranges, ","),
	}
}

// count prints n; a size that saturated (2^64 addresses or more, a /64)
// prints as about that.
func count(n uint64) string {
	if n == math.MaxUint64 {
		return "~2^64"
	}
	return strconv.FormatUint(n, 10)
}

// Writes are the changes that make the stored objects the desired ones.
type Writes struct {
	Create []*v1alpha1.AddressPool
	Update []*v1alpha1.AddressPool // desired content, with the stored resourceVersion
	Delete []string
}

// Empty reports whether there is nothing to write.
func (w Writes) Empty() bool { return len(w.Create)+len(w.Update)+len(w.Delete) == 0 }

// Plan compares desired with stored (by name) and returns the writes:
// nothing for an object whose spec and status are already right.
func Plan(desired []*v1alpha1.AddressPool, stored map[string]*v1alpha1.AddressPool) Writes {
	var w Writes
	want := make(map[string]bool, len(desired))
	for _, d := range desired {
		want[d.Name] = true
		cur, ok := stored[d.Name]
		switch {
		case !ok:
			w.Create = append(w.Create, d)
		case !equality.Semantic.DeepEqual(cur.Spec, d.Spec) || !equality.Semantic.DeepEqual(cur.Status, d.Status):
			next := cur.DeepCopy()
			next.Spec, next.Status = d.Spec, d.Status
			w.Update = append(w.Update, next)
		}
	}
	for name := range stored {
		if !want[name] {
			w.Delete = append(w.Delete, name)
		}
	}
	slices.Sort(w.Delete)
	return w
}
