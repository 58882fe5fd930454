package broker

import "sync"

// propertyWatcher follows one cluster property's effective value.
type propertyWatcher struct {
	name string
	fn   func(value string)
	last string
}

// watchers are the registered property watchers. Calls are serialised by
// mu, so a watcher sees its property's values in order.
type watchers struct {
	mu   sync.Mutex
	list []*propertyWatcher
}

// WatchProperty calls fn with the value a cluster property takes effect
// with (see Effective) now, and again each time it changes: when the
// property is set or reset through the controller, and when a license or
// the built-in trial starts or ends for an enterprise property. fn runs on
// the broker's goroutines and must not block for long or call
// WatchProperty. The returned function stops the watch.
func (b *Broker) WatchProperty(name string, fn func(value string)) (stop func()) {
	w := &propertyWatcher{name: name, fn: fn, last: b.Effective(name)}
	b.watchers.mu.Lock()
	b.watchers.list = append(b.watchers.list, w)
	fn(w.last)
	b.watchers.mu.Unlock()
	return func() {
		b.watchers.mu.Lock()
		defer b.watchers.mu.Unlock()
		for i, x := range b.watchers.list {
			if x == w {
				b.watchers.list = append(b.watchers.list[:i], b.watchers.list[i+1:]...)
				return
			}
		}
	}
}

// fireWatchers calls the watchers whose property's effective value
// changed since they last saw it.
func (b *Broker) fireWatchers() {
	b.watchers.mu.Lock()
	defer b.watchers.mu.Unlock()
	for _, w := range b.watchers.list {
		if v := b.Effective(w.name); v != w.last {
			w.last = v
			w.fn(v)
		}
	}
}

// logPropertyChanges watches every property and logs each change of the
// value it takes effect with, so an operator sees on every broker when a
// change (or a license's end) reached it.
func (b *Broker) logPropertyChanges() {
	for _, name := range b.props.Registry().Names() {
		first := true
		b.WatchProperty(name, func(value string) {
			if first {
				first = false
				return
			}
			b.logger.Info("cluster property in effect", "name", name, "value", value)
		})
	}
}
