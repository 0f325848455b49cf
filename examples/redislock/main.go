// Command redislock tests a hand-written Redis lock with lockcheck. It has
// two variants: "lua" releases with a compare-and-delete script, which is
// correct; "get-del" releases the classic wrong way, GET the token, compare
// in the client, then DEL. Both declare the failpoint before-delete, the
// moment the client has decided the key is its own and is about to delete
// it (for get-del, between its GET and its DEL), so that a scenario can
// stop the client exactly there.
//
//	go run . run --backend redislock --nemesis pause-holder
//	go run . scenario run --file get-del-race.yaml   # false: lease safety
//	go run . scenario run --file lua-release.yaml    # true
//	go test                                          # both, through package locktest
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/lockcheck/lockcheck"
)

// beforeDelete is the moment a release has decided the key is its own and
// is about to delete it.
const beforeDelete = "before-delete"

func main() {
	lockcheck.Register(lockcheck.Backend{
		Name:       "redislock",
		Variants:   []string{"lua", "get-del"},
		Failpoints: map[string][]string{"lua": {beforeDelete}, "get-del": {beforeDelete}},
		Topology:   "redis", // lockcheck starts a redis-server for it
		Open:       open,
	})
	lockcheck.Main()
}

// open builds one client of the lock, of the variant c names.
func open(c lockcheck.Config) (lockcheck.Lock, error) {
	return &redisLock{rdb: redis.NewClient(&redis.Options{Addr: c.Addrs[0]}), cfg: c}, nil
}

type redisLock struct {
	rdb *redis.Client
	cfg lockcheck.Config
}

func (l *redisLock) Acquire(ctx context.Context, key string) (lockcheck.Grant, error) {
	b := make([]byte, 8)
	rand.Read(b)
	token := hex.EncodeToString(b)
	ok, err := l.rdb.SetNX(ctx, key, token, l.cfg.TTL).Result()
	if err != nil {
		return lockcheck.Grant{}, err // unknown: the SET may have run
	}
	if !ok {
		return lockcheck.Grant{}, lockcheck.ErrNotAcquired
	}
	return lockcheck.Grant{Token: token, TTL: l.cfg.TTL}, nil
}

var compareAndDelete = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

func (l *redisLock) Release(ctx context.Context, key string, g lockcheck.Grant) (bool, error) {
	if l.cfg.Variant != "get-del" {
		// The script compares and deletes in one step: a pause here
		// delays it, and it then deletes nothing that is not its own.
		l.cfg.Failpoint.Hit(beforeDelete)
		n, err := compareAndDelete.Run(ctx, l.rdb, []string{key}, g.Token).Int()
		return n == 1, err
	}
	// The race: the key may expire and be taken by another client between
	// this GET and the DEL below, which then deletes the other client's key.
	v, err := l.rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) || (err == nil && v != g.Token) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	l.cfg.Failpoint.Hit(beforeDelete)
	n, err := l.rdb.Del(ctx, key).Result()
	return n == 1, err
}

// Clean deletes a run's keys from a Redis that lockcheck did not start
// (--addr): lockcheck.Cleaner.
func (l *redisLock) Clean(ctx context.Context, keys []string) error {
	return l.rdb.Del(ctx, keys...).Err()
}

func (l *redisLock) Close() error { return l.rdb.Close() }
