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
func (e *Enterprise) WatchProperty(name string, fn func(value string)) (stop func()) {
	w := &propertyWatcher{name: name, fn: fn, last: e.Effective(name)}
	e.watchers.mu.Lock()
	e.watchers.list = append(e.watchers.list, w)
	fn(w.last)
	e.watchers.mu.Unlock()
	return func() {
		e.watchers.mu.Lock()
		defer e.watchers.mu.Unlock()
		for i, x := range e.watchers.list {
			if x == w {
				e.watchers.list = append(e.watchers.list[:i], e.watchers.list[i+1:]...)
				return
			}
		}
	}
}

// fireWatchers calls the watchers whose property's effective value
// changed since they last saw it.
func (e *Enterprise) fireWatchers() {
	e.watchers.mu.Lock()
	defer e.watchers.mu.Unlock()
	for _, w := range e.watchers.list {
		if v := e.Effective(w.name); v != w.last {
			w.last = v
			w.fn(v)
		}
	}
}

// logPropertyChanges watches every property and logs each change of the
// value it takes effect with, so an operator sees on every broker when a
// change (or a license's end) reached it.
func (e *Enterprise) logPropertyChanges() {
	for _, name := range e.props.Registry().Names() {
		first := true
		e.WatchProperty(name, func(value string) {
			if first {
				first = false
				return
			}
			e.logger.Info("cluster property in effect", "name", name, "value", value)
		})
	}
}
