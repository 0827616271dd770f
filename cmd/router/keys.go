package main

import (
	"context"
	"log/slog"

	"github.com/sluice-dev/sluice/internal/apikeys"
)

// keyReloadBuffer bounds the reports kept for the started callback (tests
// read a few).
const keyReloadBuffer = 16

// apiKeys are the router's bearer keys, loaded from their files: the front
// door's API keys and the admin token, each nil (open) without its file.
type apiKeys struct {
	front, admin *apikeys.Keys
	// reloads has what the watches reported, for the started callback;
	// the newest is dropped when it is full.
	reloads chan apikeys.Reload
}

// loadAPIKeys loads the key files of cfg, and warns of each one not given.
func loadAPIKeys(cfg config, logger *slog.Logger) (apiKeys, error) {
	k := apiKeys{reloads: make(chan apikeys.Reload, keyReloadBuffer)}
	var err error
	if cfg.apiKeysFile != "" {
		if k.front, err = apikeys.Load(cfg.apiKeysFile); err != nil {
			return apiKeys{}, err
		}
	} else {
		logger.Warn("no --api-keys-file: the front door accepts every request")
	}
	if cfg.adminTokenFile != "" {
		if k.admin, err = apikeys.Load(cfg.adminTokenFile); err != nil {
			return apiKeys{}, err
		}
	} else {
		logger.Warn("no --admin-token-file: the admin API is open")
	}
	return k, nil
}

// watch runs, as parts of p until ctx ends, a watch of each key file that
// rereads it every --keys-poll-interval and logs what it found.
func (k apiKeys) watch(ctx context.Context, p *parts, cfg config, logger *slog.Logger) {
	for _, w := range []struct {
		name, path string
		keys       *apikeys.Keys
	}{{"api keys", cfg.apiKeysFile, k.front}, {"admin token", cfg.adminTokenFile, k.admin}} {
		if w.keys == nil {
			continue
		}
		watch := apikeys.Watch{Path: w.path, Keys: w.keys, Interval: cfg.keysPoll, Report: func(r apikeys.Reload) {
			logKeyReload(logger, r)
			select {
			case k.reloads <- r:
			default:
			}
		}}
		p.run(w.name, func() error { return watch.Run(ctx) })
	}
}

// logKeyReload logs what a key watch reported: the file and the number of
// keys, never a key.
func logKeyReload(logger *slog.Logger, r apikeys.Reload) {
	if r.Err != nil {
		logger.Warn("key file not reloaded; the keys loaded before stay in force", "file", r.Path, "keys", r.Keys, "error", r.Err.Error())
		return
	}
	logger.Info("key file reloaded", "file", r.Path, "keys", r.Keys)
}
