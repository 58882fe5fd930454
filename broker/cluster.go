package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/weir-broker/weir/broker/controller"
	"github.com/weir-broker/weir/raft"
)

// Brokers talk to each other over the RPC listener. The controller node's
// own services: hello (who are you, are you in a cluster), join (add me to
// the controller group), propose (apply this controller command; answered
// by the controller leader only, others name it) and the controller
// group's quorum (quorum.go); the broker adds the partitions' (reads,
// progress, elections) and the properties' status.
const (
	serviceHello   = "cluster.hello"
	serviceJoin    = "cluster.join"
	servicePropose = "cluster.propose"
)

// maxVoters is how many brokers vote in the controller group; the rest
// follow as non-voters.
const maxVoters = 3

type helloReply struct {
	NodeID  int32  `json:"node_id"`
	RPCAddr string `json:"rpc_addr"`
	// Formed: this node has applied a cluster id, so a cluster exists
	// to join. A voter that has only bootstrapped is not formed yet: its
	// fellow seeds must bootstrap too for an election to happen.
	Formed bool `json:"formed"`
}

type joinRequest struct {
	NodeID      int32                    `json:"node_id"`
	RPCAddr     string                   `json:"rpc_addr"`
	Incarnation controller.IncarnationID `json:"incarnation"`
}

// leaderReply is what join and propose answer: done, or the leader to
// ask instead.
type leaderReply struct {
	OK         bool   `json:"ok"`
	LeaderAddr string `json:"leader_addr,omitempty"`

	Index           uint64 `json:"index,omitempty"`
	Code            int16  `json:"code,omitempty"`
	Message         string `json:"message,omitempty"`
	BrokerEpoch     uint64 `json:"broker_epoch,omitempty"`
	FirstProducerID int64  `json:"first_producer_id,omitempty"`
	ConfigVersion   int64  `json:"config_version,omitempty"`
	// DeletedACLs is DeleteACLs' answer, which the proposer returns to
	// its client.
	DeletedACLs [][]controller.ACLBinding `json:"deleted_acls,omitempty"`
}

// registerServices answers hello, join and propose on mux, with the
// broker's own services.
func (c *controllerNode) registerServices(addr string, services map[string]raft.Handler) error {
	hello := func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		return json.Marshal(helloReply{NodeID: c.node.NodeID, RPCAddr: addr, Formed: c.state.View().ClusterID() != ""})
	}
	join := func(ctx context.Context, _ string, req []byte) ([]byte, error) {
		var jr joinRequest
		if err := json.Unmarshal(req, &jr); err != nil {
			return nil, err
		}
		return json.Marshal(c.handleJoin(ctx, jr))
	}
	propose := func(ctx context.Context, _ string, req []byte) ([]byte, error) {
		return json.Marshal(c.handlePropose(ctx, req))
	}
	handlers := map[string]raft.Handler{serviceHello: hello, serviceJoin: join, servicePropose: propose, serviceControllerQuorum: c.serveControllerQuorum}
	maps.Copy(handlers, services)
	for name, h := range handlers {
		if err := c.mux.Handle(name, h); err != nil {
			return err
		}
	}
	return nil
}

func (c *controllerNode) notLeader() leaderReply {
	_, addr := c.group.Leader()
	return leaderReply{LeaderAddr: addr}
}

// handleJoin adds a broker to the controller group: a voter while there
// are fewer than maxVoters, else a non-voter. Joining twice is harmless.
func (c *controllerNode) handleJoin(ctx context.Context, jr joinRequest) leaderReply {
	g := c.group
	if g == nil || !g.IsLeader() {
		return c.notLeader()
	}
	// A node id held by a live broker with other data is refused before
	// Raft sees it: adding it would hand that broker's vote to another
	// process.
	v := c.state.View()
	if reg, ok := v.Broker(jr.NodeID); ok && reg.Incarnation != jr.Incarnation && v.Live(jr.NodeID, time.Now()) {
		return leaderReply{Code: kerr.DuplicateBrokerRegistration.Code, Message: fmt.Sprintf(
			"node id %d is held by a live broker at %s (incarnation %s); give this broker another node_id, or stop the other one", jr.NodeID, reg.RPCAddr, reg.Incarnation)}
	}
	servers, err := g.Configuration()
	if err != nil {
		return leaderReply{Code: kerr.NotController.Code, Message: err.Error()}
	}
	id := strconv.Itoa(int(jr.NodeID))
	voters := 0
	for _, s := range servers {
		if s.ID == id && s.Addr == jr.RPCAddr {
			return leaderReply{OK: true}
		}
		if s.Voter {
			voters++
		}
	}
	if voters < maxVoters {
		err = g.AddVoter(ctx, id, jr.RPCAddr)
	} else {
		err = g.AddNonvoter(ctx, id, jr.RPCAddr)
	}
	if err != nil {
		return leaderReply{Code: kerr.NotController.Code, Message: err.Error()}
	}
	c.logger.Info("broker joined the controller group", "node_id", jr.NodeID, "rpc_addr", jr.RPCAddr, "voter", voters < maxVoters)
	return leaderReply{OK: true}
}

// handlePropose applies a forwarded controller command on the leader.
func (c *controllerNode) handlePropose(ctx context.Context, data []byte) leaderReply {
	g := c.group
	if !g.IsLeader() {
		return c.notLeader()
	}
	resp, index, err := g.Apply(ctx, data)
	if err != nil {
		if errors.Is(err, raft.ErrNotLeader) {
			return c.notLeader()
		}
		return leaderReply{Code: kerr.NotController.Code, Message: err.Error()}
	}
	res, _ := resp.(controller.Result)
	r := leaderReply{OK: true, Index: index, BrokerEpoch: res.BrokerEpoch, FirstProducerID: res.FirstProducerID, ConfigVersion: res.ConfigVersion,
		DeletedACLs: res.DeletedACLs}
	if res.Err != nil {
		r.Code, r.Message = controller.ErrorCode(res.Err), res.Err.Error()
	}
	return r
}

// applyCommand commits data through the controller group, on this node
// when it leads, else through the leader. It retries while leadership
// moves, until ctx ends.
func (c *controllerNode) applyCommand(ctx context.Context, data []byte) (controller.Result, uint64, error) {
	g := c.group
	for {
		if g.IsLeader() {
			resp, index, err := g.Apply(ctx, data)
			if err == nil {
				res, ok := resp.(controller.Result)
				if !ok {
					return controller.Result{}, 0, fmt.Errorf("%w: controller answered %T", kerr.UnknownServerError, resp)
				}
				return res, index, nil
			}
			if !errors.Is(err, raft.ErrNotLeader) {
				return controller.Result{}, 0, fmt.Errorf("%w: %v", kerr.NotController, err)
			}
		} else if _, addr := g.Leader(); addr != "" {
			reply, err := c.mux.Call(ctx, addr, servicePropose, data)
			if err == nil {
				var lr leaderReply
				if err := json.Unmarshal(reply, &lr); err != nil {
					return controller.Result{}, 0, fmt.Errorf("%w: %v", kerr.UnknownServerError, err)
				}
				if lr.OK {
					res := controller.Result{Index: lr.Index, BrokerEpoch: lr.BrokerEpoch, FirstProducerID: lr.FirstProducerID, ConfigVersion: lr.ConfigVersion,
						DeletedACLs: lr.DeletedACLs}
					if lr.Code != 0 {
						res.Err = fmt.Errorf("%w: %s", kerr.ErrorForCode(lr.Code), lr.Message)
					}
					return res, lr.Index, nil
				}
				if lr.Code != 0 {
					return controller.Result{}, 0, fmt.Errorf("%w: %s", kerr.ErrorForCode(lr.Code), lr.Message)
				}
			}
		}
		select {
		case <-ctx.Done():
			return controller.Result{}, 0, fmt.Errorf("%w: no controller leader answered: %v", kerr.NotController, ctx.Err())
		case <-c.ctx.Done():
			return controller.Result{}, 0, fmt.Errorf("%w: shutting down", kerr.NotController)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// bootstrapOrJoin starts a brand-new node with seeds: if any seed is
// already in a cluster, join it; once every seed has answered and none
// is, the (up to) three lowest node ids bootstrap the controller group
// with identical configurations, and the others join it.
func (c *controllerNode) bootstrapOrJoin(ctx context.Context, self raft.Server) error {
	for {
		var hellos []helloReply
		formed := false
		for _, seed := range c.node.Seeds {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			reply, err := c.mux.Call(cctx, seed, serviceHello, nil)
			cancel()
			if err != nil {
				continue
			}
			var h helloReply
			if json.Unmarshal(reply, &h) == nil {
				hellos = append(hellos, h)
				formed = formed || h.Formed
			}
		}
		switch {
		case formed:
			return c.joinCluster(ctx, self)
		case len(hellos) == len(c.node.Seeds):
			voters := []raft.Server{self}
			for _, h := range hellos {
				voters = append(voters, raft.Server{ID: strconv.Itoa(int(h.NodeID)), Addr: h.RPCAddr, Voter: true})
			}
			sort.Slice(voters, func(i, j int) bool { return nodeOrder(voters[i].ID) < nodeOrder(voters[j].ID) })
			if len(voters) > maxVoters {
				voters = voters[:maxVoters]
			}
			if slices.ContainsFunc(voters, func(s raft.Server) bool { return s.ID == self.ID }) {
				c.logger.Info("bootstrapping the controller group", "voters", voters)
				return c.group.Bootstrap(voters)
			}
			return c.joinCluster(ctx, self)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("seeds %v: %d of %d answered, none in a cluster: %w", c.node.Seeds, len(hellos), len(c.node.Seeds), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func nodeOrder(id string) int {
	n, _ := strconv.Atoi(id)
	return n
}

// joinCluster asks the seeds (and the leader they name) to add this node.
func (c *controllerNode) joinCluster(ctx context.Context, self raft.Server) error {
	req, _ := json.Marshal(joinRequest{NodeID: c.node.NodeID, RPCAddr: self.Addr, Incarnation: c.incarnation})
	var refusedSince time.Time // first DUPLICATE_BROKER_REGISTRATION
	for {
		targets := append([]string(nil), c.node.Seeds...)
		for len(targets) > 0 {
			addr := targets[0]
			targets = targets[1:]
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			reply, err := c.mux.Call(cctx, addr, serviceJoin, req)
			cancel()
			if err != nil {
				continue
			}
			var lr leaderReply
			if json.Unmarshal(reply, &lr) != nil {
				continue
			}
			if lr.OK {
				c.logger.Info("joined the controller group", "via", addr)
				return nil
			}
			if lr.Code == kerr.DuplicateBrokerRegistration.Code {
				if refusedSince.IsZero() {
					refusedSince = time.Now()
					c.logger.Info("node id held by a live registration; retrying until it expires", "wait", duplicateRegistrationWait, "err", lr.Message)
				}
				if time.Since(refusedSince) > duplicateRegistrationWait {
					return fmt.Errorf("%w: %s", kerr.DuplicateBrokerRegistration, lr.Message)
				}
				break
			}
			if lr.LeaderAddr != "" && lr.LeaderAddr != addr {
				targets = append([]string{lr.LeaderAddr}, targets...)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("join the cluster through %v: %w", c.node.Seeds, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
