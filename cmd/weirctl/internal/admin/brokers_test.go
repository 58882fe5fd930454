package admin

import (
	"testing"
)

func TestForBroker(t *testing.T) {
	c := &Client{base: "https://seed.example:9644"}
	for _, tc := range []struct {
		b    Broker
		want string
	}{
		{Broker{AdminAddr: "10.0.0.2:9644", KafkaAddr: "10.0.0.2:9092"}, "https://10.0.0.2:9644"},
		{Broker{AdminAddr: "0.0.0.0:9645", KafkaAddr: "b1.example:9092"}, "https://b1.example:9645"},
		{Broker{AdminAddr: "[::]:9645", KafkaAddr: ":9092"}, "https://seed.example:9645"},
		{Broker{AdminAddr: ":9646", KafkaAddr: "[fd00::1]:9092"}, "https://[fd00::1]:9646"},
	} {
		got, err := c.forBroker(tc.b)
		if err != nil || got.base != tc.want {
			t.Errorf("%+v: got %v, %v; want %s", tc.b, got, err, tc.want)
		}
	}
	if _, err := c.forBroker(Broker{}); err != errNoAdminAddr {
		t.Errorf("no admin_addr: %v", err)
	}
	if _, err := c.forBroker(Broker{AdminAddr: "no-port"}); err == nil {
		t.Error("want an error for an admin_addr without a port")
	}
}
