// Package assign is the server-side partition assignors of Kafka's
// consumer group protocol (KIP-848): given a group's members, their
// subscriptions and their current target assignment, and the subscribed
// topics' partition counts, an Assignor computes the group's next target
// assignment. The coordinator picks one by the name a member sends in
// group.remote.assignor ("uniform", Kafka's default, or "range").
//
// Both follow Kafka 4.1's assignors (UniformAssignor with its homogeneous
// and heterogeneous builders, and RangeAssignor): for the same group they
// give the same assignment as Kafka, except where Kafka's result hangs on
// the iteration order of a Java hash collection (see below).
//
// # Uniform
//
// When every member subscribes to the same topics, each member gets a
// quota, the partition count divided by the member count, plus one for as
// many members as the division leaves over. A member keeps its current
// partitions up to its quota, and the rest go to members under theirs.
// Counts differ by at most one; a member joining takes no more than its
// share and nothing else moves; a member leaving moves only its own
// partitions.
//
// When subscriptions differ, members keep every current partition of a
// topic they still subscribe to, the partitions nobody has go to each
// topic's least loaded subscribers, and then rounds of per-topic moves
// take partitions from a topic's most loaded subscribers to its least
// loaded. The result is balanced per topic (no member holding some of a
// topic has two partitions more than another of its subscribers), which
// with overlapping subscriptions is not always balanced overall; Kafka
// accepts that, and so does this package.
//
// # Range
//
// Each topic's partitions are cut into contiguous ranges, one per
// subscriber in member order, the first (partitions mod subscribers)
// subscribers taking one more. Topics with the same subscribers and
// partition count are therefore co-partitioned: a member gets the same
// partition numbers of each, which joins of those topics need.
//
// The current assignment plays no part. Kafka's first server-side range
// assignor was sticky, and Kafka replaced it (KAFKA-16944) because
// stickiness cannot be had together with co-partitioning; recomputing
// from the member order keeps co-partitioning. The order is what gives
// stability: static members come first, by instance ID, so a static
// member that rejoins under a new member ID gets its old ranges back, and
// dynamic members follow by member ID.
//
// # Decisions
//
// Members are taken in member ID order (range: after the static ones).
// Kafka takes them in the order of its member map, a hash map; its tests
// sort them to pin results down. A fixed order makes the assignment a
// function of the group alone, so a coordinator that moves or replays
// computes the same one, and the input's order does not matter.
//
// Topics are taken in topic ID order as Kafka's Uuid.compareTo has it:
// each half as a signed 64-bit number. The heterogeneous assignment
// breaks ties between topics by ID, so this order is what keeps its
// result equal to Kafka's.
//
// With one subscription for all, the partitions nobody had are handed out
// in topic ID order; Kafka hands them out in the order of a hash set of
// topic IDs. Every member's count, and what each member keeps, are the
// same as Kafka's; which of the free partitions go to which member can
// differ.
//
// Whether the subscriptions are all the same is judged on the topics
// that exist. Kafka judges on subscribed names, including topics not
// created yet; only existing topics are assigned, so the two judgements
// differ only for a group whose subscriptions differ in missing topics,
// and then either algorithm gives a valid, balanced assignment.
//
// A subscribed topic missing from topics is ignored, where Kafka's
// assignors throw. Kafka's coordinator resolves subscriptions against the
// same metadata the assignor reads, so its throw never fires; here the
// caller resolves, and a topic deleted in between should cost its
// partitions, not the group's assignment.
//
// A current assignment Kafka's coordinator could never pass is still
// handled: partitions out of range or repeated are dropped, and one that
// two members claim stays with the first in member order, so a damaged
// record cannot lose a partition or assign one twice.
//
// A member over its quota keeps its lowest partitions. Kafka keeps the
// first in its set's iteration order, which for its hash sets of small
// integers is ascending.
//
// Every member has an entry in the result, empty when it has nothing;
// Kafka leaves out members of a group with no subscribed topics, and its
// coordinator reads a missing entry as empty.
//
// The result shares no memory with the input. Kafka hands back unchanged
// assignments as the same immutable maps; Go has no immutable maps, and a
// shared one would let a caller's change to either side corrupt the
// other. All of a result's partition lists are pieces of one array, so
// copying costs one allocation per member, not per partition.
//
// Partitions per subscriber are compared by cross-multiplying the
// integers, where Kafka divides in floating point: exact, and the same
// order as Kafka's while partition and member counts stay below 2^26.
//
// Member.Rack is carried but unused: Kafka 4.1's server-side assignors
// are not rack-aware.
package assign
