#pragma once

// A table sharded by key over the ranks of a group (issue 31): rank r holds,
// in a local table of its own (memory, or memory in front of its own RocksDB
// tier), the rows of the keys it owns, KeyOwner(key, ranks) == r. It is an
// EmbeddingTable like any other, so that the training step does not know
// whether it trains alone or with others:
//
//   Pull(keys)   each rank buckets its batch's distinct keys by owner and
//                sends each bucket to its owner (all-to-all(v): counts, then
//                keys); an owner pulls the distinct keys it was sent from
//                its local table (creating rows) and sends the rows back
//                (all-to-all(v) of floats). Each key crosses the wire once
//                per rank per direction, however often the batch holds it.
//   Push(keys)   the keys' gradients go to their owners the same way; an
//                owner sums the contributions to each key in rank order and
//                pushes the sums once (one sparse optimizer step per key per
//                step, as one rank pushing the summed gradient would).
//   Lookup(keys) as Pull, through the local tables' Lookup.
//
// Every one of these is a collective: every rank calls it, in the same
// order, with its own keys (possibly none). Pull, Push and Lookup each use
// their own communicator (ShardedTableComms), so that a pipeline's pull and
// push stages, which run on different threads at once, never share one.
//
// Equivalence: N ranks pulling and pushing their keys give every owner's
// local table the updates that one table would get from the N ranks' keys
// pulled and pushed together with each key's gradients summed in rank order
// (tests/embedding/sharded_table_test.cc checks it bit for bit).
//
// What stays local: set_step (every rank sets the same step), EvictExpired,
// Prefetch and PrepareKeys (the keys this rank owns; a hint), Reserve (this
// rank's share), num_rows, memory_bytes, stats and stored_rows (this rank's
// rows: what its checkpoint holds).

#include <memory>

#include "core/communicator.h"
#include "core/status.h"
#include "embedding/embedding_table.h"

namespace ember::embedding {

// The rank that owns `key` among `ranks` ranks: a function of the key and
// the rank count alone, so that rows saved by N ranks can be moved to their
// owners among M on resume. Independent of the local tables' own sharding
// (EmbeddingTableOptions::num_shards), so that an owner's keys spread over
// all of its local shards. REQUIRES: ranks >= 1.
int KeyOwner(Key key, int ranks);

// The communicators of one rank's sharded table, not owned; each is used by
// one thread at a time (the caller's of Pull, of Push, of Lookup). All three
// are groups of the same ranks with this rank at the same position. `lookup`
// may be `pull` when the caller never runs Lookup while a Pull may run
// (evaluation between training steps).
struct ShardedTableComms {
  Communicator* pull = nullptr;
  Communicator* push = nullptr;
  Communicator* lookup = nullptr;
};

// Wraps `local`, which holds this rank's rows. InvalidArgument when a
// communicator is missing or the three disagree on rank or size. A
// communication error of a collective (a lost rank: DeadlineExceeded or
// Unavailable naming it) is returned with the operation as context; the
// group is then unusable.
Result<std::unique_ptr<EmbeddingTable>> NewShardedTable(std::unique_ptr<EmbeddingTable> local,
                                                        const ShardedTableComms& comms);

}  // namespace ember::embedding
