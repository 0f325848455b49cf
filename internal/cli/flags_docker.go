package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/backends/catalog"
	"github.com/lockcheck/lockcheck/harness"
)

func init() {
	runFlagHooks = append(runFlagHooks, func(fl *pflag.FlagSet) func(*harness.Config) error {
		params := runtimeFlags(fl)
		return func(cfg *harness.Config) error {
			p, err := params()
			if err != nil {
				return err
			}
			for k, v := range p {
				cfg.Run.Params[k] = v
			}
			return nil
		}
	})
}

// runtimeFlags declares --runtime and the image of each kind the backends'
// nodes run in under the docker runtime (--<kind>-image); the function
// it returns gives their values as run params.
func runtimeFlags(fl *pflag.FlagSet) func() (map[string]string, error) {
	runtime := fl.String("runtime", harness.RuntimeProcess, "where the lock service's nodes run: process (local processes on loopback) or docker (containers on a private Docker network; build the images first with \"lockcheck images build\")")
	images := map[string]*string{}
	for _, img := range catalog.Images() {
		images[img.Param()] = fl.String(img.Param(), img.Tag, "docker runtime: image of the "+img.Runs)
	}
	return func() (map[string]string, error) {
		switch *runtime {
		case harness.RuntimeProcess:
			return map[string]string{harness.ParamRuntime: *runtime}, nil
		case harness.RuntimeDocker:
			params := map[string]string{harness.ParamRuntime: *runtime}
			for param, ref := range images {
				params[param] = *ref
			}
			return params, nil
		}
		return nil, fmt.Errorf("--runtime %q: choose process or docker", *runtime)
	}
}
