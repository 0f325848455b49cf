package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/lockcheck/lockcheck/harness"
	"github.com/lockcheck/lockcheck/harness/container"
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

// runtimeFlags declares --runtime and the images of the docker runtime;
// the function it returns gives their values as run params.
func runtimeFlags(fl *pflag.FlagSet) func() (map[string]string, error) {
	runtime := fl.String("runtime", harness.RuntimeProcess, "where the lock service's nodes run: process (local processes on loopback) or docker (containers on a private Docker network; build the images first with \"lockcheck images build\")")
	redisImage := fl.String(harness.ParamRedisImage, container.RedisImage, "docker runtime: image of the Redis nodes (redis-server on PATH; libfaketime for clock faults)")
	etcdImage := fl.String(harness.ParamEtcdImage, container.EtcdImage, "docker runtime: image of the etcd members (etcd on PATH)")
	return func() (map[string]string, error) {
		switch *runtime {
		case harness.RuntimeProcess:
			return map[string]string{harness.ParamRuntime: *runtime}, nil
		case harness.RuntimeDocker:
			return map[string]string{harness.ParamRuntime: *runtime, harness.ParamRedisImage: *redisImage, harness.ParamEtcdImage: *etcdImage}, nil
		}
		return nil, fmt.Errorf("--runtime %q: choose process or docker", *runtime)
	}
}
