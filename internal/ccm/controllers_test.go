package ccm

import (
	"context"
	"slices"
	"testing"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/controller-manager/controller"

	"github.com/groundcloud/groundcloud/internal/lbclass"
	"github.com/groundcloud/groundcloud/internal/outofservice"
)

// TestControllerInitializers: the class controller is added to a copy of
// the upstream map, which stays as it was.
func TestControllerInitializers(t *testing.T) {
	before := app.ControllerNames(app.DefaultInitFuncConstructors)
	got := app.ControllerNames(controllerInitializers(&Options{}))
	want := append(slices.Clone(before), lbclass.ControllerName, outofservice.ControllerName)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("controllers %v, want %v", got, want)
	}
	if after := app.ControllerNames(app.DefaultInitFuncConstructors); !slices.Equal(before, after) {
		t.Errorf("upstream's DefaultInitFuncConstructors changed: %v, was %v", after, before)
	}
}

// TestClassOnlyStopsServiceController: with --load-balancer-class-only the
// upstream service controller is not started; without it, it is.
func TestClassOnlyStopsServiceController(t *testing.T) {
	for _, classOnly := range []bool{false, true} {
		started := false
		fake := func(app.ControllerInitContext, *config.CompletedConfig, cloudprovider.Interface) app.InitFunc {
			return func(context.Context, genericcontrollermanager.ControllerContext) (controller.Interface, bool, error) {
				started = true
				return nil, true, nil
			}
		}
		init := unlessClassOnly(fake, &Options{LoadBalancerClassOnly: classOnly})(app.ControllerInitContext{}, nil, nil)
		_, enabled, err := init(context.Background(), genericcontrollermanager.ControllerContext{})
		if err != nil || enabled == classOnly || started == classOnly {
			t.Errorf("class only %v: enabled %v, started %v, err %v", classOnly, enabled, started, err)
		}
	}
	if _, ok := controllerInitializers(&Options{})[names.ServiceLBController]; !ok {
		t.Error("the service controller is missing")
	}
}
