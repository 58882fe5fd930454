// Package txn is the transaction coordinator: the state of every
// transactional id whose partition of __transaction_state this broker
// leads, and the transitions Kafka's TransactionCoordinator makes.
//
// # State
//
// A transactional id lives in partition abs(javaHashCode(id)) %
// partitions of __transaction_state, as in Kafka (group.PartitionFor).
// Its state is one record there, key TransactionLogKey v0 and value
// TransactionLogValue v0 in Kafka's formats (kmsg.TxnMetadataKey and
// TxnMetadataValue): producer id and epoch, timeout, status, the
// partitions of the ongoing transaction and two timestamps. Every
// transition writes the whole new state through the Store before it
// takes effect or is answered, so a coordinator that takes the partition
// over (Raft leadership moves) replays the same states and finishes what
// was in flight: a transaction in PrepareCommit or PrepareAbort has its
// markers written again and is completed; an Ongoing one times out.
//
// # Transitions (Kafka's, transaction version 1)
//
//	InitProducerId: Empty/Complete* -> Empty with the epoch bumped (a new
//	                producer id when the epoch is exhausted); Ongoing ->
//	                PrepareAbort with the epoch bumped (the old producer is
//	                fenced), answered CONCURRENT_TRANSACTIONS until done.
//	                A producer recovering with its pair (KIP-360) bumps
//	                only its current pair, repeats a bump it asked for, or
//	                gets a new producer id when the id has no state (new or
//	                expired); any other pair is fenced.
//	AddPartitions:  Empty/Ongoing/Complete* -> Ongoing.
//	EndTxn:         Ongoing -> PrepareCommit/PrepareAbort, answered at
//	                once; the markers are then written to every partition
//	                of the transaction (MarkerWriter) and the state becomes
//	                CompleteCommit/CompleteAbort.
//	timeout:        Ongoing past its timeout -> PrepareAbort with the
//	                epoch bumped, then as EndTxn.
//	expiry:         Empty/Complete* idle past transactional.id.expiration
//	                -> removed (a tombstone).
//
// While a transaction is in a Prepare state every request about its id
// gets CONCURRENT_TRANSACTIONS, which clients retry.
//
// # Locking
//
// Coordinator.mu guards the table of ids and the partitions' load states;
// each id has its own mutex, held across a transition's Store append so
// transitions of one id are serial. Coordinator.mu is never held while
// waiting for an id's mutex or for the Store; an id's mutex is never held
// while writing markers.
package txn
