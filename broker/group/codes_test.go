package group

import "github.com/twmb/franz-go/pkg/kerr"

// kerrCode looks a wire code up by Kafka's name, so tests read like the
// protocol documentation.
func kerrCode(name string) int16 {
	for code := int16(-1); code < 200; code++ {
		if e := kerr.TypedErrorForCode(code); e != nil && e.Message == name {
			return code
		}
	}
	panic("unknown error name " + name)
}
