package dataplane

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// encodeEntry is a conntrack message as a dump sends it: the nfgenmsg
// header and both tuples.
func encodeEntry(family uint8, orig, reply ctTuple) []byte {
	b := (&nl.Nfgenmsg{NfgenFamily: family}).Serialize()
	b = append(b, orig.attr(nl.CTA_TUPLE_ORIG, family == unix.AF_INET6).Serialize()...)
	return append(b, reply.attr(nl.CTA_TUPLE_REPLY, family == unix.AF_INET6).Serialize()...)
}

func TestParseEntry(t *testing.T) {
	for _, tt := range []struct {
		family      uint8
		orig, reply ctTuple
	}{
		{
			family: unix.AF_INET,
			orig:   ctTuple{Src: ctClient, Dst: ctVIP, Proto: unix.IPPROTO_UDP, SrcPort: 40000, DstPort: 53},
			reply:  ctTuple{Src: ctNodeB, Dst: ctVIP, Proto: unix.IPPROTO_UDP, SrcPort: 30053, DstPort: 40000},
		},
		{
			family: unix.AF_INET6,
			orig:   ctTuple{Src: ctClient6, Dst: ctVIP6, Proto: unix.IPPROTO_TCP, SrcPort: 40000, DstPort: 80},
			reply:  ctTuple{Src: ctNodeB6, Dst: ctVIP6, Proto: unix.IPPROTO_TCP, SrcPort: 30080, DstPort: 40000},
		},
	} {
		orig, reply, err := parseEntry(encodeEntry(tt.family, tt.orig, tt.reply))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]ctTuple{tt.orig, tt.reply}, []ctTuple{orig, reply}, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Errorf("parseEntry (-want +got):\n%s", diff)
		}
	}
	if _, _, err := parseEntry([]byte{2, 0, 0, 0, 12, 0, 1, 0, 1, 2}); err == nil {
		t.Error("parseEntry accepted a truncated attribute")
	}
}

func TestCTFilter(t *testing.T) {
	entryOrig := ctTuple{Src: ctClient, Dst: ctVIP, Proto: unix.IPPROTO_UDP, SrcPort: 40000, DstPort: 53}
	entryReply := ctTuple{Src: ctNodeB, Dst: ctVIP, Proto: unix.IPPROTO_UDP, SrcPort: 30053, DstPort: 40000}
	tests := []struct {
		name              string
		filter            ctFilter
		origFlags, rFlags uint32
		match             bool
	}{
		{
			name:      "a stale UDP flow",
			filter:    ctFilter{Orig: ctTuple{Dst: ctVIP, Proto: unix.IPPROTO_UDP, DstPort: 53}, Reply: ctTuple{Src: ctNodeB, Proto: unix.IPPROTO_UDP, SrcPort: 30053}},
			origFlags: ctFilterIPDst | ctFilterProto | ctFilterDstPort, rFlags: ctFilterIPSrc | ctFilterProto | ctFilterSrcPort,
			match: true,
		},
		{
			name:      "another backend",
			filter:    ctFilter{Orig: ctTuple{Dst: ctVIP, Proto: unix.IPPROTO_UDP, DstPort: 53}, Reply: ctTuple{Src: ctNodeA, Proto: unix.IPPROTO_UDP, SrcPort: 30053}},
			origFlags: ctFilterIPDst | ctFilterProto | ctFilterDstPort, rFlags: ctFilterIPSrc | ctFilterProto | ctFilterSrcPort,
		},
		{
			name:      "TCP",
			filter:    ctFilter{Orig: ctTuple{Dst: ctVIP, Proto: unix.IPPROTO_TCP, DstPort: 53}},
			origFlags: ctFilterIPDst | ctFilterProto | ctFilterDstPort,
		},
		{
			name:   "every flow to an address",
			filter: ctFilter{Orig: ctTuple{Dst: ctVIP}}, origFlags: ctFilterIPDst, match: true,
		},
		{
			name:   "ports without a protocol are not compared",
			filter: ctFilter{Orig: ctTuple{Dst: ctVIP, DstPort: 54}}, origFlags: ctFilterIPDst, match: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.filter.matches(entryOrig, entryReply); got != tt.match {
				t.Errorf("matches = %v, want %v", got, tt.match)
			}
			flags := map[uint16]uint32{}
			tuples := map[uint16]ctTuple{}
			for _, a := range tt.filter.attrs(unix.AF_INET) {
				typ := a.Type & nlaTypeMask
				err := walkAttrs(a.Serialize()[unix.SizeofNlAttr:], func(sub uint16, v []byte) error {
					if typ == ctaFilter {
						flags[sub] = nl.NativeEndian().Uint32(v)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if typ != ctaFilter {
					var tu ctTuple
					if err := parseTuple(a.Serialize()[unix.SizeofNlAttr:], &tu); err != nil {
						t.Fatal(err)
					}
					tuples[typ] = tu
				}
			}
			if flags[ctaFilterOrigFlags] != tt.origFlags || flags[ctaFilterReplyFlags] != tt.rFlags {
				t.Errorf("CTA_FILTER flags orig %#x reply %#x, want %#x %#x", flags[ctaFilterOrigFlags], flags[ctaFilterReplyFlags], tt.origFlags, tt.rFlags)
			}
			// The encoded tuples decode to the filter's fields.
			wantOrig := tt.filter.Orig
			if wantOrig.Proto == 0 {
				wantOrig.SrcPort, wantOrig.DstPort = 0, 0
			}
			if tuples[nl.CTA_TUPLE_ORIG] != wantOrig || tuples[nl.CTA_TUPLE_REPLY] != tt.filter.Reply {
				t.Errorf("encoded tuples %+v, want orig %+v reply %+v", tuples, wantOrig, tt.filter.Reply)
			}
		})
	}
}

// The kernel gets no IPv6 address to compare (it compares them the wrong
// way round), only protocol and ports; IPv4 filters go whole.
func TestCTFilterInKernel(t *testing.T) {
	v6 := ctFilter{Orig: ctTuple{Dst: ctVIP6, Proto: unix.IPPROTO_UDP, DstPort: 53}, Reply: ctTuple{Src: ctNodeB6, Proto: unix.IPPROTO_UDP, SrcPort: 30053}}
	want := ctFilter{Orig: ctTuple{Proto: unix.IPPROTO_UDP, DstPort: 53}, Reply: ctTuple{Proto: unix.IPPROTO_UDP, SrcPort: 30053}}
	if got := v6.inKernel(); got != want {
		t.Errorf("IPv6 inKernel = %+v, want %+v", got, want)
	}
	if got := (ctFilter{Orig: ctTuple{Dst: ctVIP6}}).inKernel().attrs(unix.AF_INET6); got != nil {
		t.Errorf("an IPv6 address alone gives the kernel a filter: %v", got)
	}
	v4 := ctFilter{Orig: ctTuple{Dst: ctVIP, Proto: unix.IPPROTO_UDP, DstPort: 53}}
	if got := v4.inKernel(); got != v4 {
		t.Errorf("IPv4 inKernel = %+v, want it whole", got)
	}
}

func TestWalks(t *testing.T) {
	udp := func(vip, backend netip.Addr, port uint16) ctFilter {
		return ctFilter{
			Orig:  ctTuple{Dst: vip, Proto: unix.IPPROTO_UDP, DstPort: port},
			Reply: ctTuple{Src: backend, Proto: unix.IPPROTO_UDP, SrcPort: 30053},
		}
	}
	to := func(vip netip.Addr) ctFilter { return ctFilter{Orig: ctTuple{Dst: vip}} }
	var manyVIPs, manyFlows []ctFilter
	for i := range maxWalks + 1 {
		vip := netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i)})
		manyVIPs = append(manyVIPs, to(vip))
		manyFlows = append(manyFlows, udp(vip, ctNodeB, 53))
	}
	tests := []struct {
		name    string
		filters []ctFilter
		want    []ctFilter
	}{
		{name: "one filter each", filters: []ctFilter{to(ctVIP), udp(ctVIP, ctNodeB, 53)}, want: []ctFilter{to(ctVIP), udp(ctVIP, ctNodeB, 53)}},
		{name: "duplicates once", filters: []ctFilter{to(ctVIP), to(ctVIP)}, want: []ctFilter{to(ctVIP)}},
		{name: "IPv6 without addresses, once", filters: []ctFilter{to(ctVIP6), to(ctOther6)}, want: []ctFilter{{}}},
		{
			name:    "IPv6 flows by protocol and ports",
			filters: []ctFilter{udp(ctVIP6, ctNodeB6, 53), udp(ctOther6, ctNodeA6, 53)},
			want:    []ctFilter{{Orig: ctTuple{Proto: unix.IPPROTO_UDP, DstPort: 53}, Reply: ctTuple{Proto: unix.IPPROTO_UDP, SrcPort: 30053}}},
		},
		{name: "too many addresses: the whole family", filters: manyVIPs, want: []ctFilter{{}}},
		{
			name:    "too many flows of one backend: what they share",
			filters: manyFlows,
			want:    []ctFilter{{Orig: ctTuple{Proto: unix.IPPROTO_UDP, DstPort: 53}, Reply: ctTuple{Src: ctNodeB, Proto: unix.IPPROTO_UDP, SrcPort: 30053}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, walks(tt.filters), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("walks (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFilterSet(t *testing.T) {
	set := newFilterSet([]ctFilter{
		{Orig: ctTuple{Dst: ctVIP}},
		{Reply: ctTuple{Src: ctNodeB6, Proto: unix.IPPROTO_UDP, SrcPort: 30053}},
	})
	for _, tt := range []struct {
		orig, reply ctTuple
		want        bool
	}{
		{orig: ctTuple{Src: ctClient, Dst: ctVIP, Proto: unix.IPPROTO_TCP}, want: true},
		{orig: ctTuple{Src: ctClient, Dst: ctNodeA, Proto: unix.IPPROTO_TCP}},
		{orig: ctTuple{Dst: ctVIP6}, reply: ctTuple{Src: ctNodeB6, Proto: unix.IPPROTO_UDP, SrcPort: 30053}, want: true},
		{orig: ctTuple{Dst: ctVIP6}, reply: ctTuple{Src: ctNodeA6, Proto: unix.IPPROTO_UDP, SrcPort: 30053}},
	} {
		if got := set.matches(tt.orig, tt.reply); got != tt.want {
			t.Errorf("matches(%+v, %+v) = %v, want %v", tt.orig, tt.reply, got, tt.want)
		}
	}
}
